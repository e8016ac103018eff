#!/usr/bin/env node
'use strict';
/* global process, fetch, AbortSignal */
/*
 * The consent opener of `agent-access conformance client`: the scenarios set it as $BROWSER for the client under
 * test. It takes the consent URL as its last argument (as git and gh call $BROWSER), requests it, and follows the
 * redirects to the client's loopback redirect URI. The scenario's emulator answers the consent page by its consent
 * policy (approve, or deny for consent-denied), so this plays the person's browser without a screen.
 * A client that prints the URL instead of opening it can run `"$BROWSER" "$url"` itself (or this file directly).
 */
const url = process.argv[process.argv.length - 1];
if (process.argv.length < 3 || !/^https?:\/\//i.test(url)) {
  process.stderr.write('usage: consent-opener URL (the consent URL, as $BROWSER is called)\n');
  process.exit(2);
}
// Bounded: an opener that no one waits for must not outlive its scenario by long.
fetch(url, { redirect: 'follow', signal: AbortSignal.timeout(30_000) })
  .then((res) => res.arrayBuffer())
  .then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`consent-opener: ${url}: ${e && e.cause ? e.cause.message : e.message}\n`);
      process.exit(1);
    },
  );
