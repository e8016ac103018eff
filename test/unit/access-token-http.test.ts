/**
 * Spec 5.4, 3.3 over HTTP: a token the server has seen before is still checked on every request. The signer's rules
 * themselves (verified once and remembered; expiry, nbf and issuer still checked) are in test/unit/access-token.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/state/clock.js';
import { revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { startInProcess } from '../helpers/emulator.js';
import { authorizeAndApprove, decodeJwt, http } from '../helpers/oauth.js';

const T0 = Date.UTC(2026, 10, 21, 9, 0, 0);

describe('spec 5.4, 3.3: over HTTP, a token used before is still checked on every request', () => {
  it('used at 899 s, refused at 900 s; used once, refused after its grant is revoked', async () => {
    const clock = new ManualClock(T0);
    const emu = await startInProcess({ clock });
    const flow = await authorizeAndApprove(emu);
    const ask = () =>
      http(`${emu.baseUrl}/chat/ask`, {
        method: 'POST',
        headers: { authorization: `Bearer ${flow.tokens!.access_token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ question: 'Wann kommt der Hufschmied?' }),
      });
    expect((await ask()).status).toBe(200);
    clock.advance(899_000);
    expect((await ask()).status).toBe(200);
    clock.advance(1_000);
    const expired = await ask();
    expect(expired.status).toBe(401);
    expect(expired.headers['www-authenticate']).toContain('the access token has expired');

    const again = await authorizeAndApprove(emu);
    const askAgain = () =>
      http(`${emu.baseUrl}/chat/ask`, {
        method: 'POST',
        headers: { authorization: `Bearer ${again.tokens!.access_token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ question: 'Wann kommt der Hufschmied?' }),
      });
    expect((await askAgain()).status).toBe(200);
    await revokeGrant(emu.core, decodeJwt(again.tokens!.access_token).payload.grant_id, 'person');
    const revoked = await askAgain();
    expect(revoked.status).toBe(401);
    expect(revoked.headers['www-authenticate']).toContain('access was revoked by the person');
  });
});
