import { compose } from './compose.js';
import type { Analyzer, Hit, Source } from './search.js';

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
/** The verbs of a change, as stems or with the particle that makes them one (`leg … an`). */
const WRITE_VERBS = [
  'erstell',
  'anleg',
  String.raw`leg\w*\s(?:\S+\s){0,12}an\b`,
  'änder',
  'aktualisier',
  'lösch',
  'entfern',
  String.raw`schreib\w*\s+(?:einen|eine|ein|den|die|das)\s`,
  'verfass',
  'hinzufüg',
  String.raw`füg\w*\s(?:\S+\s){0,12}hinzu`,
  String.raw`trag\w*\s(?:\S+\s){0,12}ein\b`,
  'verschieb',
  'markier',
  String.raw`setz\w*\s(?:\S+\s){0,12}auf\b`,
  String.raw`send\w*\s`,
  String.raw`schick\w*\s`,
  'storn',
  'kündig',
  'bestell',
  String.raw`buch\w*\s`,
  String.raw`benenn\w*\s(?:\S+\s){0,12}um\b`,
];
const WRITE_INTENT = new RegExp(String.raw`(^|[\s,.;:!?„"'(])(` + WRITE_VERBS.join('|') + ')', 'i');

/** A question in the grammatical sense ("Wer erstellt …?", "Was steht in der Kündigung …?") asks to read, whatever its verbs. */
const QUESTION_WORDS = [
  'was',
  'wer',
  'wen',
  'wem',
  'wessen',
  'wann',
  'wo',
  'wohin',
  'woher',
  'wie',
  'welche[rsmn]?',
  'warum',
  'weshalb',
  'wieso',
  'gibt es',
  'ist',
  'sind',
  'hat',
  'haben',
  'steht',
  'stehen',
  'kann',
  'können',
];
const READ_QUESTION = new RegExp(String.raw`^\s*(?:` + QUESTION_WORDS.join('|') + String.raw`)(?!\p{L})[^?]*\?\s*$`, 'iu');

export const asksForChange = (question: string): boolean => !READ_QUESTION.test(question) && WRITE_INTENT.test(question.toLowerCase());

const NOTHING_FOUND = 'Dazu habe ich in Ihrem Arbeitsbereich und Ihrer Wissensdatenbank nichts gefunden.';

/**
 * The German answer to a question from what search found (compose.ts): one to three sentences quoted from the best
 * passages, each with the number of its source; `sources` are the cited ones, `[1]` first. The same hits always give
 * the same answer.
 */
export function composeAnswer(question: string, hits: readonly Hit[], resource: string, analyze: Analyzer): Omit<AskAnswer, 'message_id'> {
  const { sentences, cited } = compose(question, hits, analyze);
  const sources = cited.map(({ kind, id, title, snippet }) => ({ kind, id, title, snippet }));
  const found = sentences.join(' ');
  if (asksForChange(question)) {
    const head =
      'Über diese Schnittstelle kann ich nichts ändern: POST /chat/ask liest nur. Änderungen am Arbeitsbereich laufen über die Agentenebene ' +
      `(${resource}, Werkzeuge „ask“ und „continue_ask“) und werden erst ausgeführt, nachdem Sie jede einzelne Aktion freigegeben haben.`;
    return { answer: found ? `${head}\n\nIn Ihren Unterlagen steht dazu: ${found}` : head, sources };
  }
  return { answer: found || NOTHING_FOUND, sources };
}
