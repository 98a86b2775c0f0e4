// What the simulator's gateway calls on its admission stage, whichever it is: the gateway's own
// AdmissionController (`--admission expediter`) or the emulation of the routed system's own admission
// (`--admission native`, this folder). acquire() answers through `done` exactly once, at once or later;
// released() is called when an admitted attempt ends.
// Thread: the run's. Types only.
import type { AdmissionDone, AdmissionRequest } from '../../../src/admission/types.ts';

export interface SimAdmission {
  acquire(req: AdmissionRequest, done: AdmissionDone): unknown;
  released(poolId: string, tokens: number): void;
}

/** One native admission: what it does, and where upstream says so (for the run's notes and the README). */
export interface NativeAdmission extends SimAdmission {
  readonly description: string;
  /**
   * Requests this admission did anything to but route at once (rejected, or queued): while it is 0 the run
   * is decision for decision the same as one that admits everything (the race's twin runs, race.ts).
   */
  readonly interventions: number;
}
