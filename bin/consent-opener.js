#!/usr/bin/env node
'use strict';
/* global process, URL, setTimeout -- Node's, for a plain script (CommonJS, bin/package.json) */
/*
 * The consent opener of `agent-access conformance client`: the scenarios set it as $BROWSER for the client under
 * test. It takes the consent URL as its last argument (as git and gh call $BROWSER), requests it, and follows the
 * redirects to the client's loopback redirect URI. The scenario's emulator answers the consent page by its consent
 * policy (approve, or deny for consent-denied), so this plays the person's browser without a screen.
 * A client that prints the URL instead of opening it can run `"$BROWSER" "$url"` itself (or this file directly).
 * An in-process client calls the same steps without a process: ClientRun.openConsent (src/conformance/runner.ts).
 *
 * node:http rather than fetch: loading undici, which fetch does, costs more CPU than the rest of this script and
 * Node's own start together, paid for every authorization of every scenario.
 */
const http = require('node:http');

/** As many redirects as fetch follows. */
const MAX_REDIRECTS = 20;

/**
 * Requests `href` and follows its redirects; resolves once an answer that is not a redirect has been read whole, and
 * rejects with what went wrong (no prefix: the caller names the URL). `signal` ends the requests.
 */
function followConsent(href, signal) {
  return new Promise((resolve, reject) => {
    const step = (url, redirects) => {
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return reject(new Error(`${redirects === 0 ? 'an address' : 'a redirect'} to ${url.protocol} cannot be followed`));
      const { get } = url.protocol === 'https:' ? require('node:https') : http;
      get(url, { signal }, (res) => {
        const location = res.headers.location;
        res.resume();
        if (res.statusCode >= 300 && res.statusCode < 400 && location !== undefined) {
          if (redirects === MAX_REDIRECTS) return reject(new Error(`more than ${MAX_REDIRECTS} redirects`));
          let next;
          try {
            next = new URL(location, url);
          } catch {
            return reject(new Error(`a redirect to ${JSON.stringify(location)}, which is not a URL`));
          }
          return step(next, redirects + 1);
        }
        res.on('end', () => resolve());
        res.on('error', reject);
      }).on('error', reject);
    };
    step(new URL(href), 0);
  });
}

module.exports = { followConsent };

if (require.main === module) {
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
  followConsent(arg).then(
    () => process.exit(0),
    (e) => fail(e.message),
  );
}
