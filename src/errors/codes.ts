// The error table: every code the gateway puts on the wire, with its HTTP status and OpenAI `type`.
// Thread: any. README's "Errors" table is checked against this table by test/unit/errors/codes.test.ts.
export const ERROR_CODES = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'We could not parse the JSON body of your request.' },
  invalid_value: { status: 400, type: 'invalid_request_error', message: 'A field of the request has an invalid value.' },
  invalid_framing: { status: 400, type: 'invalid_request_error', message: 'The request has more than one Content-Length, or a Transfer-Encoding other than one chunked; the connection is closed.' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error', message: "The request exceeds the model's maximum context length." },
  invalid_api_key: { status: 401, type: 'invalid_request_error', message: 'Incorrect API key provided.' },
  model_not_allowed: { status: 403, type: 'permission_error', message: 'This API key may not use this model.' },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model does not exist.' },
  previous_response_not_found: { status: 404, type: 'invalid_request_error', message: 'The previous response cannot be reached.' },
  response_not_found: { status: 404, type: 'invalid_request_error', message: 'No stored response has this id.' },
  not_found: { status: 404, type: 'invalid_request_error', message: 'Unknown route.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method not allowed on this route.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: 'Content-Type must be application/json.' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Token rate limit reached for this tenant.' },
  concurrency_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many requests in flight for this tenant.' },
  server_overloaded: { status: 429, type: 'rate_limit_error', message: 'The fleet has no room for this request right now.' },
  request_header_fields_too_large: { status: 431, type: 'invalid_request_error', message: 'The request headers are too large; the connection is closed.' },
  internal_error: { status: 500, type: 'server_error', message: 'The gateway failed to handle the request.' },
  upstream_unavailable: { status: 502, type: 'server_error', message: 'No replica could be reached for this request.' },
  upstream_error: { status: 502, type: 'server_error', message: 'The replica failed while handling the request.' },
  no_healthy_replica: { status: 503, type: 'service_unavailable_error', message: 'No healthy replica serves this model.' },
  shutting_down: { status: 503, type: 'service_unavailable_error', message: 'The gateway is shutting down.' },
  quota_unavailable: { status: 503, type: 'service_unavailable_error', message: 'The quota store is unavailable.' },
  upstream_timeout: { status: 504, type: 'server_error', message: 'The replica did not produce a first token in time.' },
} as const satisfies Record<string, { status: number; type: string; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;
