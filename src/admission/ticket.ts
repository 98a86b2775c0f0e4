// One request's place in admission: what it asked, its callback, when it arrived, how long it may wait
// (its deadline orders the queue), and the KV tokens it needs. Returned by acquire, passed to cancel.
// Thread: the acceptor. One object per request.
import type { QueuedEntry } from './deadline-queue.ts';
import type { AdmissionDone, AdmissionRequest } from './types.ts';

export class AdmissionTicket implements QueuedEntry {
  readonly req: AdmissionRequest;
  readonly done: AdmissionDone;
  readonly arrivedMs: number;
  readonly allowanceMs: number;
  readonly deadlineMs: number;
  readonly seq: number;
  needTokens: number;
  /** `done` has been called. */
  settled = false;
  queued = false;

  constructor(req: AdmissionRequest, done: AdmissionDone, arrivedMs: number, allowanceMs: number, seq: number, needTokens: number) {
    this.req = req;
    this.done = done;
    this.arrivedMs = arrivedMs;
    this.allowanceMs = allowanceMs;
    this.deadlineMs = arrivedMs + allowanceMs;
    this.seq = seq;
    this.needTokens = needTokens;
  }
}
