#!/usr/bin/env node
'use strict';
/* global process, URL, setTimeout -- Node's, for a plain script (CommonJS, bin/package.json) */
/*
 * The consent opener of `agent-access conformance client`: the scenarios set it as $BROWSER for the client under
 * test. It takes the consent URL as its last argument (as git and gh call $BROWSER), requests it, and follows the
 * redirects to the client's loopback redirect URI. The scenario's emulator answers the consent page by its consent
 * policy (approve, or deny for consent-denied), so this plays the person's browser without a screen.
 * A client that prints the URL instead of opening it can run `"$BROWSER" "$url"` itself (or this file directly).
 *
 * node:http rather than fetch: loading undici, which fetch does, costs more CPU than the rest of this script and
 * Node's own start together, paid for every authorization of every scenario.
 */
const http = require('node:http');

/** As many redirects as fetch follows. */
const MAX_REDIRECTS = 20;

const arg = process.argv[process.argv.length - 1];
if (process.argv.length < 3 || !/^https?:\/\//i.test(arg)) {
  process.stderr.write('usage: consent-opener URL (the consent URL, as $BROWSER is called)\n');
  process.exit(2);
}

const fail = (message) => {
  process.stderr.write(`consent-opener: ${arg}: ${message}\n`);
  process.exit(1);
};
// Bounded: an opener that no one waits for must not outlive its scenario by long.
setTimeout(() => fail('no answer within 30 s'), 30_000).unref();

/** Requests `url` and follows its redirects; exits 0 once an answer that is not a redirect has been read whole. */
function open(url, redirects) {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail(`a redirect to ${url.protocol} cannot be followed`);
  const { get } = url.protocol === 'https:' ? require('node:https') : http;
  get(url, (res) => {
    const location = res.headers.location;
    res.resume();
    if (res.statusCode >= 300 && res.statusCode < 400 && location !== undefined) {
      if (redirects === MAX_REDIRECTS) return fail(`more than ${MAX_REDIRECTS} redirects`);
      let next;
      try {
        next = new URL(location, url);
      } catch {
        return fail(`a redirect to ${JSON.stringify(location)}, which is not a URL`);
      }
      return void open(next, redirects + 1);
    }
    res.on('end', () => process.exit(0));
    res.on('error', (e) => fail(e.message));
  }).on('error', (e) => fail(e.message));
}

open(new URL(arg), 0);
