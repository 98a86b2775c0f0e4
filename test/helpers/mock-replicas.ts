// Mock vLLM replicas for tests: in-process (startMockReplica) or as a child process (spawnMockReplica, port 0
// by default, URL parsed from the child's first line) for tests that kill a replica. Thread: main (test
// process). Not on any hot path.
export { startMockReplica, type MockReplica, type MockOptions } from '../mock-replica/server.ts';
export { spawnMockReplica, type SpawnedReplica } from '../mock-replica/spawn-replica.ts';
