// Fixed-size records of Int32 words in growable typed arrays, each with a count word; a freed record is
// chained through its count. BlockHolders keeps two: each hash's holder bitmap, and with a holder cap each
// hash's holders oldest first.
// Thread: the one that owns the index. O(1) allocate and release; arrays double as they fill.
const NONE = -1;

export class Int32Arena {
  readonly stride: number;
  /** Record r's words: data[r × stride, (r + 1) × stride). Replaced when it grows: read it after allocate(). */
  data: Int32Array;
  /** Record r's count; a free record's is the next free one. */
  counts: Int32Array;
  private free = NONE;
  private used = 0;

  constructor(stride: number, initialRecords: number) {
    this.stride = stride;
    this.data = new Int32Array(initialRecords * stride);
    this.counts = new Int32Array(initialRecords);
  }

  /** The record the next allocate() returns (to enter it in a map before taking it). */
  next(): number {
    return this.free !== NONE ? this.free : this.used;
  }

  /** A record with count 0. Its words are as its last owner left them. */
  allocate(): number {
    if (this.free !== NONE) {
      const r = this.free;
      this.free = this.counts[r]!;
      this.counts[r] = 0;
      return r;
    }
    if (this.used === this.counts.length) {
      const counts = new Int32Array(this.counts.length * 2);
      counts.set(this.counts);
      this.counts = counts;
      const data = new Int32Array(this.data.length * 2);
      data.set(this.data);
      this.data = data;
    }
    this.counts[this.used] = 0;
    return this.used++;
  }

  release(r: number): void {
    this.counts[r] = this.free;
    this.free = r;
  }
}
