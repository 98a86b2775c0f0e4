// A deterministic draw for randomized router tests (operation sequences, not statistics).

/** xorshift32: enough to pick operations deterministically. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}
