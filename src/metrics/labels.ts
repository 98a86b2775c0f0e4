// Label bounding: maps free-form strings (pool ids, replica ids, tenants, error codes) onto a fixed set of
// label values decided at setup, so a typo, a new tenant or a hostile header can never mint a new series.
// Thread: main and workers. On the hot path only through index lookups built here at setup (one Map.get).
// Cost: one Map per label dimension, sized by config; unknown values collapse to OTHER_LABEL.

/** Label value for anything outside the configured set. */
export const OTHER_LABEL = 'other';
/** Label value for "not applicable" (no pool resolved yet, no error code, no tenant). */
export const NONE_LABEL = 'none';

/**
 * A closed set of label values. `index(v)` returns the slot of `v`, of "other" for unknown strings and of
 * "none" for null; callers keep per-slot metric children in arrays indexed the same way.
 */
export class BoundedLabel {
  readonly values: readonly string[];
  private readonly slots = new Map<string, number>();
  private readonly otherIndex: number;
  private readonly noneIndex: number;

  constructor(known: Iterable<string>) {
    const values: string[] = [];
    for (const v of known) {
      if (v === OTHER_LABEL || v === NONE_LABEL || this.slots.has(v)) continue;
      this.slots.set(v, values.length);
      values.push(v);
    }
    this.otherIndex = values.push(OTHER_LABEL) - 1;
    this.noneIndex = values.push(NONE_LABEL) - 1;
    this.values = values;
  }

  index(value: string | null): number {
    if (value === null) return this.noneIndex;
    return this.slots.get(value) ?? this.otherIndex;
  }

  label(value: string | null): string {
    return this.values[this.index(value)]!;
  }
}

/**
 * An open set that admits the first `capacity` distinct values it sees and maps the rest to "other".
 * For dimensions that are bounded in practice but not enumerable at setup (routing policy names).
 */
export class CappedLabel {
  private readonly seen = new Set<string>();
  private readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  label(value: string): string {
    if (this.seen.has(value)) return value;
    if (this.seen.size >= this.capacity || value === '') return OTHER_LABEL;
    this.seen.add(value);
    return value;
  }
}
