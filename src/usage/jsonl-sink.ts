// jsonl:PATH sink: appends one JSON line per record through a file WriteStream (the kernel's page cache does
// the batching; the stream keeps order). Thread: main. Hot path: one stream.write per request.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { UsageRecord, UsageSink } from './usage-record.ts';

export class JsonlSink implements UsageSink {
  readonly name: string;
  private readonly stream: WriteStream;
  private failed: Error | null = null;

  constructor(path: string) {
    this.name = `jsonl:${path}`;
    mkdirSync(dirname(path), { recursive: true });
    this.stream = createWriteStream(path, { flags: 'a' });
    this.stream.on('error', (err) => {
      this.failed = err;
    });
  }

  write(line: string, _record: UsageRecord): void {
    if (this.failed !== null) return;
    this.stream.write(line);
  }

  /** Resolves once everything written so far reached the file. */
  flush(): Promise<void> {
    if (this.failed !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.stream.write('', () => resolve());
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.stream.end(() => resolve());
    });
  }
}
