/**
 * What the CLI writes to a terminal never carries a control sequence from the data it prints:
 * names, environments and group keys stored before the input rules existed (docs/input.md) may
 * hold ESC and other control characters, which a terminal would obey. Every line the CLI
 * writes goes through this one function.
 *
 * Escaped as `\uXXXX`: C0 controls other than tab and newline (CR included: it overwrites a
 * line), DEL, C1 controls, the bidirectional overrides and isolates (text that reads other than
 * it is stored), and unpaired surrogates. Inside `--json` output the escape is JSON's own, so
 * the document still parses to the same value.
 */
const UNSAFE =
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
