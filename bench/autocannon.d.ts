// Minimal typings for the parts of autocannon@8 the bench uses (no @types/autocannon installed).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Request {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    setupRequest?: (req: Request, context: Record<string, unknown>) => Request | null | undefined;
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, unknown>) => void;
  }

  export interface Client extends EventEmitter {
    setRequests(requests: Request[]): void;
    setBody(body: string | Buffer): void;
  }

  export interface Options {
    url: string;
    connections?: number;
    pipelining?: number;
    duration?: number;
    amount?: number;
    /** requests per second over all connections */
    overallRate?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    requests?: Request[];
    setupClient?: (client: Client) => void;
    initialContext?: Record<string, unknown>;
  }

  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  export interface Result {
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    duration: number;
    statusCodeStats?: Record<string, { count: number }>;
    '2xx': number;
    '4xx': number;
    '5xx': number;
  }

  function autocannon(opts: Options): Promise<Result> & EventEmitter;
  export default autocannon;
}
