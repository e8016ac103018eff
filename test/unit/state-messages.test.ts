/**
 * Issue 45.11: a refused state file is told in one line that names the file, the way to start over, and the
 * snapshots as a way back.
 */
import { describe, expect, it } from 'vitest';
import { parseState } from '../../src/core/state/state.js';
import { resetAdvice } from '../../src/store/state-files.js';

describe('45.11 the message of a state file that is not JSON', () => {
  it('45.11 stays one line when the parser quotes the file text (newlines, tabs, controls escaped) and names snapshot restore', () => {
    let message = '';
    try {
      parseState('Z\n\tZ\u0007\r\n', '/tmp/x/state.json', resetAdvice('/tmp/x/state.json'));
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/^state file \/tmp\/x\/state\.json is not valid JSON \(/);
    expect(message).not.toMatch(/[\u0000-\u001f]/);
    expect(message).toContain('"Z\\n\\tZ\\u0007\\r\\n"');
    expect(message).toContain('agent-access snapshot restore NAME');
    expect(message).toContain('`_baseline`: the state as first created');
  });
});
