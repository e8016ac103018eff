/** The people the emulator signs in automatically on its browser pages (from fixtures). */
export interface Person {
  id: string;
  name: string;
  email: string;
  default?: boolean;
}

export function defaultPerson(persons: readonly Person[]): Person {
  const person = persons.find((p) => p.default) ?? persons[0];
  if (!person) throw new Error('no person is defined in the fixtures');
  return person;
}
