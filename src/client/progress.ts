import { useAnsi, type ClientContext } from './context.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A progress line on stderr with elapsed time. On a terminal it redraws in place with a spinner; elsewhere
 * (CI logs, pipes, NO_COLOR) it prints a line only when the text changes, so logs stay readable.
 */
export class Progress {
  readonly #ctx: ClientContext;
  readonly #animate: boolean;
  readonly #showElapsed: boolean;
  readonly #started = Date.now();
  #text = '';
  #printed = '';
  #frame = 0;
  #timer: NodeJS.Timeout | undefined;

  /** `elapsed: false` for a line that counts down itself. */
  constructor(ctx: ClientContext, text: string, options: { elapsed?: boolean } = {}) {
    this.#ctx = ctx;
    this.#animate = useAnsi(ctx);
    this.#showElapsed = options.elapsed ?? true;
    this.update(text);
    if (this.#animate) {
      this.#timer = setInterval(() => this.#draw(), 100);
      this.#timer.unref();
    }
  }

  /** Seconds since the start, as shown. */
  get elapsed(): string {
    const s = Math.floor((Date.now() - this.#started) / 1_000);
    return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  }

  update(text: string): void {
    this.#text = text;
    this.#draw();
  }

  #draw(): void {
    if (this.#animate) {
      this.#frame = (this.#frame + 1) % FRAMES.length;
      this.#ctx.stderr.write(`\r\x1b[2K${FRAMES[this.#frame]} ${this.#text}${this.#showElapsed ? ` ${this.elapsed}` : ''}`);
    } else if (this.#text !== this.#printed) {
      this.#printed = this.#text;
      this.#ctx.stderr.write(`${this.#text}\n`);
    }
  }

  /** A line of its own above the progress line (a terminal's is redrawn below it). */
  say(line: string): void {
    if (this.#animate) this.#ctx.stderr.write('\r\x1b[2K');
    this.#ctx.stderr.write(`${line}\n`);
    if (this.#animate) this.#draw();
  }

  /** Whether the line redraws in place (a terminal), so a caller can update a countdown in it. */
  get live(): boolean {
    return this.#animate;
  }

  /** Clears the line (terminal) and prints a final line if given. */
  stop(final?: string): void {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#animate) this.#ctx.stderr.write('\r\x1b[2K');
    if (final) this.#ctx.stderr.write(`${final}\n`);
  }
}
