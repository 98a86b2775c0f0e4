// vLLM's error bodies (v0.10.1+ nested shape, docs/vllm-facts.md "Error bodies and statuses") and the exact
// messages the mock reproduces. Thread: main (mock process). Off the hot path (errors only).

export const ErrorType = {
  BadRequest: 'BadRequestError',
  NotFound: 'NotFoundError',
  Internal: 'InternalServerError',
  ServiceUnavailable: 'ServiceUnavailableError',
  /** serving_responses passes err_type="invalid_request_error" for its own refusals (unknown id, cancel). */
  InvalidRequest: 'invalid_request_error',
} as const;
export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

export class VllmError extends Error {
  constructor(readonly status: number, readonly type: ErrorType, message: string) {
    super(message);
  }
}

/** `{"error":{"message":…,"type":…,"param":null,"code":<status>}}`: the status is the numeric code. */
export function errorBody(status: number, type: string, message: string): string {
  return JSON.stringify({ error: { message, type, param: null, code: status } });
}

export function badRequest(message: string): VllmError {
  return new VllmError(400, ErrorType.BadRequest, message);
}

export function modelNotFound(model: string): VllmError {
  return new VllmError(404, ErrorType.NotFound, `The model \`${model}\` does not exist.`);
}

/** Prompt alone does not fit (serving_engine._validate_input, ≈v0.10.2+ wording). */
export function promptTooLong(maxModelLen: number, promptTokens: number): VllmError {
  return badRequest(
    `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptTokens} ` +
      'input tokens. Please reduce the length of the input messages.',
  );
}

/** Prompt fits but prompt + max_tokens does not. */
export function maxTokensTooLarge(maxModelLen: number, promptTokens: number, maxTokens: number): VllmError {
  return badRequest(
    `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ` +
      `${maxModelLen} tokens and your request has ${promptTokens} input tokens ` +
      `(${maxTokens} > ${maxModelLen} - ${promptTokens}).`,
  );
}

/** FastAPI RequestValidationError rendered as vLLM does (str of the pydantic error list). */
export function validationError(kind: string, loc: Array<string | number>, msg: string): VllmError {
  const locText = `(${loc.map((p) => (typeof p === 'number' ? String(p) : `'${p}'`)).join(', ')})`;
  return badRequest(`[{'type': '${kind}', 'loc': ${locText}, 'msg': '${msg}'}]`);
}
