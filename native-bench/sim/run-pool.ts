// Runs handed out to worker threads as they come: submit() a RunSpec, get its RunOutput when a thread has
// run it. A sweep submits its whole plan at once; a race submits each policy's next probe only when the
// previous one is back (the bisection decides it), so the pool keeps every thread busy with whichever
// chains are ready. With one thread, runs execute inline on the main thread.
// Thread: main. Orchestration only; each run is single-threaded on its worker.
import type { Worker } from 'node:worker_threads';
import { spawnWorker } from '../../src/util/spawn-worker.ts';
import { executeRun } from './run-output.ts';
import type { RunOutput, RunSpec } from './run-types.ts';

type WorkerReply = { ok: true; out: RunOutput } | { ok: false; index: number; error: string };

interface Pending {
  spec: RunSpec;
  priority: number;
  resolve: (o: RunOutput) => void;
  reject: (e: Error) => void;
}

export class RunPool {
  private readonly threads: number;
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: Pending[] = [];
  private readonly busy = new Map<Worker, Pending>();
  private failed: Error | null = null;

  constructor(threads: number) {
    this.threads = Math.max(1, threads);
  }

  /**
   * The run's output; rejects with the run's error (and every later submit with the first error). A free
   * thread takes the highest `priority` queued, the earliest submitted among equals.
   */
  submit(spec: RunSpec, priority = 0): Promise<RunOutput> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.threads === 1) {
      try {
        return Promise.resolve(executeRun(spec));
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ spec, priority, resolve, reject });
      this.feed();
    });
  }

  async close(): Promise<void> {
    const ws = this.workers.splice(0);
    this.idle.length = 0;
    await Promise.all(ws.map((w) => w.terminate()));
  }

  private feed(): void {
    while (this.queue.length > 0) {
      let w = this.idle.pop();
      if (!w && this.workers.length < this.threads) w = this.spawn();
      if (!w) return;
      let best = 0;
      for (let i = 1; i < this.queue.length; i++) if (this.queue[i]!.priority > this.queue[best]!.priority) best = i;
      const p = this.queue.splice(best, 1)[0]!;
      this.busy.set(w, p);
      w.postMessage(p.spec);
    }
  }

  private spawn(): Worker {
    const w = spawnWorker(new URL('./sweep-worker.ts', import.meta.url));
    this.workers.push(w);
    w.on('message', (m: WorkerReply) => {
      const p = this.busy.get(w);
      this.busy.delete(w);
      this.idle.push(w);
      if (p) {
        if (m.ok) p.resolve(m.out);
        else this.fail(p, new Error(`run ${m.index} failed: ${m.error}`));
      }
      this.feed();
    });
    const died = (err: Error): void => {
      const p = this.busy.get(w);
      this.busy.delete(w);
      const at = this.workers.indexOf(w);
      if (at >= 0) this.workers.splice(at, 1);
      if (p) this.fail(p, err);
    };
    w.on('error', died);
    w.on('exit', (code) => {
      if (this.busy.has(w)) died(new Error(`sweep worker exited with code ${code}`));
    });
    return w;
  }

  private fail(p: Pending, err: Error): void {
    this.failed ??= err;
    p.reject(err);
    for (const q of this.queue.splice(0)) q.reject(err);
  }
}
