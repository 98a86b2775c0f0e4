// GET /v1/responses/{id} and POST /v1/responses/{id}/cancel: sent to the replica that stored the response
// (response-owners.ts), whose answer is passed through (a 4xx normalised to the gateway's envelope); an id
// the gateway cannot place, or whose replica has left, restarted or is down, is a 404 response_not_found
// naming it. No quota is taken and no usage record written: neither generates tokens.
// Thread: main. Once per such request; the body is collected (a stored response is one JSON object).
import { errorBody } from '../errors/openai-error-body.ts';
import type { Rejection } from '../errors/rejection.ts';
import { statusOf } from '../errors/rejection.ts';
import type { ClientSink } from '../relay/client-sink.ts';
import type { UpstreamFailureKind } from '../upstream/upstream-errors.ts';
import type { UpstreamCall, UpstreamHandler } from '../upstream/upstream-client.ts';
import type { Services, TenantIdentity } from './services.ts';
import { normaliseUpstreamError } from './upstream-error-body.ts';

const MAX_BODY_BYTES = 32 * 1024 * 1024;

function answer(sink: ClientSink, status: number, body: string | Buffer): void {
  if (sink.aborted) return;
  sink.cork(() => {
    sink.begin(status, [['content-type', 'application/json']]);
    sink.end(body);
  });
}

function refuse(sink: ClientSink, r: Rejection): void {
  answer(sink, statusOf(r), errorBody(r));
}

export function forwardStoredResponse(svc: Services, sink: ClientSink, requestId: string, tenant: TenantIdentity, id: string, cancel: boolean): void {
  const found = svc.responses.lookup(id, tenant.name);
  let why: string | null = null;
  let slot = -1;
  if (!found.ok) {
    why = found.why === 'restarted' ? 'the replica that stored it has restarted since' : 'this gateway has not relayed a stored response with this id for this API key (or it expired)';
  } else {
    slot = svc.registry.slotOf(found.owner.replicaId);
    if (slot < 0) why = `the replica that stored it (${found.owner.replicaId}) has left the fleet`;
    else if (!svc.registry.isHealthy(slot)) why = `the replica that stored it (${found.owner.replicaId}) is down`;
  }
  if (why !== null) return refuse(sink, { code: 'response_not_found', param: 'response_id', message: `Response with id '${id}' cannot be reached: ${why}.` });
  const timeout = svc.cfg.upstream.request_timeout_ms;
  const chunks: Buffer[] = [];
  let size = 0;
  let status = 0;
  const handler: UpstreamHandler = {
    onStart(s: number) {
      status = s;
    },
    onData(chunk: Buffer) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        call.abort();
        return;
      }
      chunks.push(Buffer.from(chunk));
    },
    onEnd() {
      const body = Buffer.concat(chunks);
      if (status === 200) return answer(sink, 200, body);
      if (status >= 500) return refuse(sink, { code: 'upstream_error', message: `The replica answered with status ${status}.` });
      const r = normaliseUpstreamError(status, body, 'response_not_found');
      answer(sink, status, errorBody(r));
    },
    onError(_kind: UpstreamFailureKind, err: Error) {
      refuse(sink, { code: 'upstream_unavailable', message: `The replica that stored response '${id}' could not be reached: ${err.message}` });
    },
  };
  const call: UpstreamCall = svc.upstream.dispatch(svc.registry.replica(slot).url, {
    method: cancel ? 'POST' : 'GET',
    path: `/v1/responses/${encodeURIComponent(id)}${cancel ? '/cancel' : ''}`,
    body: cancel ? '{}' : '',
    headers: cancel ? { 'content-type': 'application/json', 'x-request-id': requestId } : { 'x-request-id': requestId },
    headersTimeoutMs: timeout,
    bodyTimeoutMs: timeout,
  }, handler);
  sink.setAbortHandler(() => call.abort());
}
