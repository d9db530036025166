/**
 * Strings a process holds many equal copies of for as long as subscriptions live (a streaming
 * operation's text, the key a shared operation's results are cached by), each kept once: `of(s)`
 * answers the copy already held. Bounded in entries and in characters, past either it starts
 * over: sharing saves memory and decides nothing, so a pool that forgets costs only a copy, and
 * one that is fed made-up text holds at most `maxChars` of it.
 */
export class Interned {
  private readonly strings = new Map<string, string>();
  private chars = 0;

  constructor(
    private readonly maxEntries = 10_000,
    private readonly maxChars = 4_000_000,
  ) {}

  /** How many strings are held. */
  get size(): number {
    return this.strings.size;
  }

  of(s: string): string {
    const known = this.strings.get(s);
    if (known !== undefined) return known;
    if (s.length > this.maxChars) return s;
    if (this.strings.size >= this.maxEntries || this.chars + s.length > this.maxChars) {
      this.strings.clear();
      this.chars = 0;
    }
    this.strings.set(s, s);
    this.chars += s.length;
    return s;
  }
}
