// ClientSink: the relay's view of the client connection. Implemented by src/server/uws-sink.ts over a uWS
// HttpResponse, and by tests over anything that records bytes. Keeps uWS out of every stage folder.
// Thread: main. Hot path: every relayed chunk goes through write().
export type HeaderList = ReadonlyArray<readonly [string, string]>;

export interface ClientSink {
  /** The client went away (or the response was already ended). Writes after this are dropped. */
  readonly aborted: boolean;
  /** Status and headers were sent. */
  readonly started: boolean;
  /** Sends the status line and headers; the body follows with write()/end(). */
  begin(status: number, headers: HeaderList): void;
  /** Writes a body chunk. Returns false when the client is backpressured: stop and wait for onDrain. */
  write(chunk: Uint8Array | string): boolean;
  /** Ends the response, optionally with a last chunk (or a whole body if begin() was not called). */
  end(chunk?: Uint8Array | string): void;
  /** One-shot callback when a backpressured client can take more. */
  onDrain(cb: () => void): void;
  /** Registers the callback for a client disconnect before the response ended (replaces any earlier one). */
  setAbortHandler(cb: () => void): void;
  /** Runs fn with writes batched into one syscall (uWS cork); required for writes outside uWS callbacks. */
  cork(fn: () => void): void;
}
