// Rendezvous (highest random weight) hashing for cold prefixes: each candidate's weight is a hash of the
// prompt's key block and the replica's id string, so every gateway computes the same order with no
// coordination, and a replica joining or leaving moves only the keys it wins or won. Ids (not slots) are
// hashed because slots differ between gateways. Thread: the acceptor. Hot path: a few Math.imul per
// candidate; an id's hash is cached per slot and recomputed only when the slot's id changes.
import type { CandidateTable } from '../candidate-table.ts';
import type { FleetView } from '../types.ts';
import { fmix32 } from '../../util/fmix32.ts';

const TWO_POW_32 = 2 ** 32;

/** FNV-1a over UTF-16 code units, finished with murmur3's mixer. */
export function idHash(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

/** The HRW weight of a replica (by its id hash) for a 53-bit block hash key. */
export function rendezvousWeight(key: number, replicaHash: number): number {
  const lo = key >>> 0;
  const hi = ((key - lo) / TWO_POW_32) >>> 0;
  return fmix32(fmix32(lo ^ replicaHash) ^ Math.imul(hi ^ 0x9e3779b9, 0x27d4eb2d) ^ (replicaHash >>> 7));
}

export class Rendezvous {
  private readonly ids: Array<string | undefined>;
  private readonly hashes: Uint32Array;

  constructor(slots: number) {
    this.ids = new Array<string | undefined>(slots);
    this.hashes = new Uint32Array(slots);
  }

  /** Writes every candidate's weight for `key` into t.weight; returns the position of the highest. */
  weigh(key: number, t: CandidateTable, fleet: FleetView): number {
    let top = 0;
    for (let i = 0; i < t.n; i++) {
      const slot = t.slot[i]!;
      const id = fleet.replica(slot).id;
      if (this.ids[slot] !== id) {
        this.ids[slot] = id;
        this.hashes[slot] = idHash(id);
      }
      t.weight[i] = rendezvousWeight(key, this.hashes[slot]!);
      if (t.weight[i]! > t.weight[top]!) top = i;
    }
    return top;
  }
}
