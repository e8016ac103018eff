/**
 * The order in which requests arrived: each is numbered when its head was received, before anything else ran for it.
 * A count, not a time, because the emulator clock may stand still (a manual clock) while requests still come in a
 * certain order. The findings judge by it whether a request could have known of an answer (RFC 9110 §10.2.3: a
 * `Retry-After` is about the client's next request, not about one already sent).
 */
export class Arrivals {
  #last = 0;

  /** Numbers a request whose head was just received. */
  next(): number {
    return ++this.#last;
  }

  /** The number of the latest request to arrive (0 before the first): every request up to it arrived by now. */
  get last(): number {
    return this.#last;
  }
}
