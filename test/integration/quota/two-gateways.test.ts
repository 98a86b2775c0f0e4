// Two gateway processes sharing one tenant in the real Redis at REDIS_URL (cases in two-gateway-suite.ts).
import { REDIS_URL, useTestRedis } from '../../helpers/redis.ts';
import { twoGatewayCases } from './two-gateway-suite.ts';

twoGatewayCases('', REDIS_URL, useTestRedis());
