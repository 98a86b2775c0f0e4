import { MemoryQuotaStore } from '../../../src/quota/memory-quota-store.ts';
import { runStoreBehaviourSuite } from './store-behaviour.ts';

runStoreBehaviourSuite('memory', (clock, leaseTtlMs) => Promise.resolve(new MemoryQuotaStore({ leaseTtlMs, clock: clock.now, renewLeases: false })));
