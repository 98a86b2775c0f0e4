// The small set of transport failure kinds the retry policy and metrics use. The client (h1-connection.ts)
// decides the kind where it knows it: any failure before the TCP connection was up is `connect`, whatever
// the errno; a failure after it is `reset`; its own timers say which timeout fired.
// Thread: main. Not hot: runs only on failures.
export type UpstreamFailureKind = 'connect' | 'reset' | 'headers_timeout' | 'body_timeout' | 'aborted' | 'other';
