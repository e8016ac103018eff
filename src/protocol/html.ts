/** HTML for the pages people see in the browser: the service's own pages and the client's loopback callback page. */

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Escapes text for HTML element content and quoted attribute values. Everything a client supplied goes through it. */
export const escapeHtml = (value: unknown): string => String(value).replace(/[&<>"'`]/g, (c) => ESCAPES[c] as string);

/** A tagged template that escapes every interpolation unless it is already `SafeHtml`. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    const part = Array.isArray(v)
      ? v.map((x) => (x instanceof SafeHtml ? x.value : escapeHtml(x))).join('')
      : v instanceof SafeHtml
        ? v.value
        : v === undefined || v === null || v === false
          ? ''
          : escapeHtml(v);
    out += part + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

/**
 * Text a client or agent supplied, inside running text: in its own bidi isolate, so that a right-to-left override in
 * it (U+202E, without its closing U+202C) cannot reverse what follows it, such as the words after the "nicht
 * verifiziert" label next to a client's name, or the next value in a sentence.
 */
export const isolated = (text: string): SafeHtml => html`<bdi>${text}</bdi>`;

/**
 * The same where no element may stand (a page's `<title>`): between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE,
 * without the value's own embeddings, overrides and isolates, one of which (U+2069) could close the isolate early.
 */
export const isolatedText = (text: string): string => `\u2068${text.replace(/[\u202A-\u202E\u2066-\u2069]/g, '')}\u2069`;

/** Bidi controls and the other invisible format characters, which can make a text look like another. */
const INVISIBLE = /[\p{Cf}\u2028\u2029]/gu;

/**
 * A value the person approves exactly as it is, isolated, with every invisible format character shown as its code
 * point: a right-to-left override inside a phone number would otherwise show its digits in reverse, and a
 * zero-width space would hide itself.
 */
export function exactly(text: string): SafeHtml {
  const parts: Array<string | SafeHtml> = [];
  let last = 0;
  for (const m of text.matchAll(INVISIBLE)) {
    parts.push(text.slice(last, m.index));
    const code = `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    parts.push(html`<span class="invisible" title="unsichtbares Zeichen ${code}">⟨${code}⟩</span>`);
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return html`<bdi>${parts}</bdi>`;
}

const STYLE =
  `
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b;line-height:1.5}
h1{font-size:1.4rem}h2{font-size:1.15rem}.badge{display:inline-block;font-size:.75rem;padding:.1rem ` +
  `.45rem;border-radius:.6rem;background:#fff3cd;color:#664d03;border:1px solid #e6c96a;vertical-align:middle}
.write{background:#f8d7da;color:#58151c;border-color:#e4a0a7}ul.scopes{padding-left:1.2rem}ul.scopes li{margin:.35rem 0}
.note{color:#555;font-size:.9rem}.buttons{display:flex;gap:.75rem;margin-top:1.5rem}
button{font-size:1rem;padding:.55rem 1.2rem;border-radius:.4rem;border:1px solid #888;background:#f4f4f4;cursor:pointer}
button.primary{background:#0b5ed7;border-color:#0b5ed7;color:#fff}code{background:#f1f1f1;padding:.05rem .3rem;border-radius:.2rem;overflow-wrap:anywhere}
ul.scopes code{font-size:.8rem}.scope-text{font-size:.9rem;color:#333}
.client{border:1px solid #ddd;border-radius:.5rem;padding:.75rem 1rem;margin:1rem 0}.client h2{font-size:1.1rem;margin:0;overflow-wrap:anywhere}
.client-id{margin:.1rem 0 .5rem;font-size:.8rem;color:#555}ul.grants{list-style:none;padding:0;margin:0}
li.grant{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem 1rem;padding:.6rem 0;border-top:1px solid #eee}
li.grant .what{flex:1 1 16rem;min-width:0}li.grant form{margin:0}
ul.chips{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.3rem}
ul.chips li{padding:.05rem .5rem;border:1px solid #d5d8dc;border-radius:.3rem;background:#f7f8fa;font-size:.85rem}
.meta{margin:.3rem 0 0;font-size:.85rem;color:#555}details.revoked,details.former{margin-top:.5rem}
details.revoked>summary,details.former>summary{cursor:pointer;font-size:.9rem;color:#333}
table{border-collapse:collapse;width:100%;font-size:.9rem}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}
.error{border-left:4px solid #b02a37;padding-left:1rem}
details.developer{margin-top:1.5rem;font-size:.9rem;color:#333}details.developer p{overflow-wrap:anywhere}
.invisible{font-size:.75em;color:#58151c;background:#f8d7da;border-radius:.2rem;padding:0 .15rem}`;

/** A whole page in the house style (German, as the service's pages are). */
export function page(title: string, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="de">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>
<style>${new SafeHtml(STYLE)}</style></head>
<body>
${body}
</body>
</html>
`.value;
}
