// GPT-2 "byte-level" alphabet: the printable stand-in character HF vocabularies use for each byte value.
// Used only by the ranks generator and its integrity test (setup / test time, never on the hot path).
const charToByte = new Map<string, number>();
{
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const code = printable.includes(b) ? b : 256 + shifted++;
    charToByte.set(String.fromCharCode(code), b);
  }
}

export function byteLevelCharToByte(ch: string): number {
  const b = charToByte.get(ch);
  if (b === undefined) throw new Error(`not a byte-level character: U+${ch.codePointAt(0)?.toString(16)}`);
  return b;
}

/** tiktoken's ranks-file text ("base64(bytes) rank" per line) for byte-level token strings indexed by rank. */
export function tiktokenRanksText(byteLevelTokens: readonly string[], count: number): string {
  const lines: string[] = [];
  for (let id = 0; id < count; id++) {
    const tokenString = byteLevelTokens[id];
    if (tokenString === undefined) throw new Error(`vocabulary has no id ${id}`);
    lines.push(`${Buffer.from(Array.from(tokenString, byteLevelCharToByte)).toString('base64')} ${id}`);
  }
  return `${lines.join('\n')}\n`;
}
