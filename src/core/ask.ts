import { sourceLabel, type Source } from './search.js';

/** Spec 2.4. */
export interface AskAnswer {
  answer: string;
  sources: Source[];
  message_id: string;
}

/**
 * A question that asks for a change (create, change, delete, send…). POST /chat/ask never changes anything
 * (spec 4.4 rule 1); such a question is answered with where changes happen instead.
 */
const WRITE_INTENT =
  /(^|[\s,.;:!?„"'(])(erstell|anleg|leg\w*\s(?:\S+\s){0,12}an\b|änder|aktualisier|lösch|entfern|schreib\w*\s+(?:einen|eine|ein|den|die|das)\s|verfass|hinzufüg|füg\w*\s(?:\S+\s){0,12}hinzu|trag\w*\s(?:\S+\s){0,12}ein\b|verschieb|markier|setz\w*\s(?:\S+\s){0,12}auf\b|send\w*\s|schick\w*\s|storn|kündig|bestell|buch\w*\s|benenn\w*\s(?:\S+\s){0,12}um\b)/i;

/** A question in the grammatical sense ("Wer erstellt …?", "Was steht in der Kündigung …?") asks to read, whatever its verbs. */
const READ_QUESTION =
  /^\s*(?:was|wer|wen|wem|wessen|wann|wo|wohin|woher|wie|welche[rsmn]?|warum|weshalb|wieso|gibt es|ist|sind|hat|haben|steht|stehen|kann|können)(?!\p{L})[^?]*\?\s*$/iu;

export const asksForChange = (question: string): boolean => !READ_QUESTION.test(question) && WRITE_INTENT.test(question.toLowerCase());

const RELEVANT = 0.35;

/** Builds the German answer from what search found; the same hits always give the same answer. */
export function composeAnswer(question: string, hits: Array<Source & { score: number }>, resource: string): Omit<AskAnswer, 'message_id'> {
  const best = hits[0]?.score ?? 0;
  const sources = hits
    .filter((h) => h.score >= best * RELEVANT)
    .slice(0, 5)
    .map(({ kind, id, title, snippet }) => ({ kind, id, title, snippet }));
  const list = sources.map((s) => `- ${sourceLabel(s.kind)} „${s.title}“: ${s.snippet}`).join('\n');
  if (asksForChange(question)) {
    const head =
      'Über diese Schnittstelle kann ich nichts ändern: POST /chat/ask liest nur. Änderungen am Arbeitsbereich laufen über die Agentenebene ' +
      `(${resource}, Werkzeuge „ask“ und „continue_ask“) und werden erst ausgeführt, nachdem Sie jede einzelne Aktion freigegeben haben.`;
    return { answer: sources.length ? `${head}\n\nDazu passend habe ich gefunden:\n${list}` : head, sources };
  }
  if (sources.length === 0) {
    return { answer: 'Dazu habe ich in Ihrem Arbeitsbereich und Ihrer Wissensdatenbank nichts gefunden.', sources: [] };
  }
  return { answer: `Dazu habe ich in Ihrem Arbeitsbereich und Ihrer Wissensdatenbank Folgendes gefunden:\n${list}`, sources };
}
