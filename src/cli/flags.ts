/**
 * The command line's text forms of `serve`'s flags. Each function reads one flag's text and throws commander's
 * InvalidArgumentError (commander prints it with the flag's name), so it serves as an `argParser` as it is. What
 * the text means is checked by the core's validators (parseConsentPolicy, parseFaultSpec, checkSeed,
 * parseRateLimit), which the admin API and the programmatic API share.
 */
import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../core/state/clock.js';
import { parseConsentPolicy, type ConsentPolicy } from '../core/emulation/consent-policy.js';
import { parseFaultSpec, type FaultSpec } from '../core/emulation/fault-spec.js';
import { parseRateLimit } from '../core/state/rate-limit.js';
import { RETENTION_NAMES, type Retention } from '../core/oauth/retention.js';
import { MAX_SEED, checkSeed } from '../core/emulation/variation.js';

/** A core validator's refusal, as the refusal of the flag's value. */
function validated<T>(check: () => T): T {
  try {
    return check();
  } catch (e) {
    if (e instanceof InvalidArgumentError) throw e;
    throw new InvalidArgumentError((e as Error).message);
  }
}

/** Real-time waits are timers, which cannot wait longer than 2^31-1 ms (about 24.8 days). */
const LONGEST_TIMER = { max: 2 ** 31 - 1, text: '24 days' };

/** `--ask-latency 250`, `--ask-timeout 30s`, `--research-duration 2m`: the core's duration forms, digits alone are milliseconds. */
export const parseDurationFlag = (value: string): number => validated(() => parseDuration(value, LONGEST_TIMER));

/** `--price-ask 0.5`: AKh, 0 or more. */
export const parsePrice = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('a price is a number of AKh, 0 or more');
  return n;
};

/** `--port 0`: 0 picks a free port. */
export const parsePort = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535) throw new InvalidArgumentError('a port is a whole number from 0 to 65535 (0 picks a free port)');
  return n;
};

/** `--journal-limit 8mb`: a size in bytes, with an optional kb, mb or gb (powers of 1024). */
export function parseSize(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(value.trim());
  const bytes = match ? Math.round(Number(match[1]) * 1024 ** ['b', 'kb', 'mb', 'gb'].indexOf((match[2] ?? 'b').toLowerCase())) : NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1024) throw new InvalidArgumentError('a size is like 64kb, 8mb or 1gb (at least 1kb)');
  return bytes;
}

/** `--max-clients 5000`: a whole number, at least 1. */
export const parseCount = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('a count is a whole number, at least 1');
  return n;
};

/** `--rate-limit 60/min`: kept as text (the emulator takes the text form), checked here. */
export function parseRateLimitFlag(value: string): string {
  validated(() => parseRateLimit(value));
  return value;
}

/** `--retention jobs=1d,families=12h`: how long each kind of finished record stays (names: RETENTION_NAMES); repeatable. */
export function parseRetentionFlag(value: string, previous: Partial<Retention> = {}): Partial<Retention> {
  const result = { ...previous };
  for (const part of value.split(',')) {
    const [name, duration] = part.split('=').map((s) => s.trim());
    if (!name || !Object.hasOwn(RETENTION_NAMES, name))
      throw new InvalidArgumentError(`unknown kind "${name ?? ''}"; use ${Object.keys(RETENTION_NAMES).join(', ')} (e.g. jobs=1d)`);
    let millis: number;
    try {
      millis = parseDuration(duration ?? '');
    } catch (e) {
      throw new InvalidArgumentError(`${name}: ${(e as Error).message}`);
    }
    if (millis <= 0) throw new InvalidArgumentError(`${name}=${duration}: a retention is longer than 0 (e.g. 30m, 12h, 7d)`);
    result[RETENTION_NAMES[name as keyof typeof RETENTION_NAMES]] = millis;
  }
  return result;
}

/**
 * `--consent DECISION`, `approve=SCOPE,SCOPE`, either prefixed with `CLIENT_ID:` for one client
 * (`approve`, `deny`, `approve=ask,research`, `client_abc:deny`); repeatable.
 */
export function parseConsentFlag(value: string): { clientId: string | null; policy: ConsentPolicy } {
  const match = /^(?:([^:=\s]+):)?(page|approve|deny)(?:=(.+))?$/.exec(value.trim());
  if (!match)
    throw new InvalidArgumentError(
      `"${value}" is not a consent policy; use page, approve, deny or approve=SCOPE,SCOPE, optionally prefixed CLIENT_ID:`,
    );
  const [, clientId, decision, scopes] = match;
  return {
    clientId: clientId ?? null,
    policy: validated(() => parseConsentPolicy({ decision: decision!, scopes: scopes?.split(/[,\s]+/).filter(Boolean) })),
  };
}

const NUMERIC_FAULT_FIELDS: ReadonlySet<string> = new Set(['count', 'rate', 'status', 'ms', 'retry_after', 'after_requests']);

/**
 * `--fault KIND` or `KIND:key=value,key=value` (`server_error:route=POST /research,status=503,count=1`), or the JSON
 * object the admin API takes. Values with commas need the JSON form. Only the text is read here: the result is
 * checked by `checkedFaultFlag`.
 */
export function parseFaultFlag(text: string): FaultSpec {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    try {
      return JSON.parse(trimmed) as FaultSpec;
    } catch (e) {
      throw new InvalidArgumentError(`--fault ${text}: not valid JSON (${(e as Error).message})`);
    }
  }
  const [kind, rest] = [trimmed.split(':', 1)[0]!, trimmed.includes(':') ? trimmed.slice(trimmed.indexOf(':') + 1) : ''];
  const spec: Record<string, unknown> = { kind };
  for (const pair of rest ? rest.split(',') : []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`--fault ${text}: "${pair}" is not key=value`);
    const key = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    spec[key] = NUMERIC_FAULT_FIELDS.has(key) && value !== '' && Number.isFinite(Number(value)) ? Number(value) : value;
  }
  return spec as unknown as FaultSpec;
}

/** A `--fault` read and checked by the core's validator (a wrong field or value fails the flag, before anything starts). */
export function checkedFaultFlag(text: string, now: number): FaultSpec {
  const spec = parseFaultFlag(text);
  validated(() => parseFaultSpec(spec, now));
  return spec;
}

/** `--vary-unspecified 42`: a seed as typed, digits only. */
export function parseSeed(text: string): number {
  if (!/^\d{1,10}$/.test(text)) throw new InvalidArgumentError(`a variation seed is a whole number from 0 to ${MAX_SEED}, not "${text}"`);
  return validated(() => checkSeed(Number(text)));
}
