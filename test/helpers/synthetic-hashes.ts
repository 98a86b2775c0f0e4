// Stand-ins for block hashes where no tokens exist (router tests, the route bench): uniform 53-bit values, as
// xxhash64's low 53 bits are, so the prefix index sees the same bucket spread as with real prompts. Equal
// (seed, index) give equal values; a "prompt" is a seed, block i its i-th value.
import { fmix32 } from '../../src/util/fmix32.ts';

export function syntheticBlockHash(seed: number, index: number): number {
  const lo = fmix32(Math.imul(seed, 0x9e3779b1) ^ index);
  return (fmix32(lo ^ seed ^ 0x5bd1e995) & 0x1fffff) * 2 ** 32 + lo;
}
