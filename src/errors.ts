/**
 * Expected failures, as plain classes the domain and services throw. The GraphQL layer
 * (src/graphql/schema/errors.ts) exposes each as a typed member of mutation result unions,
 * with a stable `code`; anything else is masked and logged with an id.
 */
import type { GateEvaluation } from "./domain/gate/types.js";

export abstract class AppError extends Error {
  abstract readonly code: string;
}

export interface FieldIssue {
  /** Dotted path of the offending input field, e.g. `input.permissions.3.action`. */
  field: string;
  code: string;
  message: string;
}

export class ValidationError extends AppError {
  readonly code = "VALIDATION_FAILED";
  constructor(readonly issues: FieldIssue[]) {
    super(issues.length === 1 ? `${issues[0]!.field}: ${issues[0]!.message}` : `${issues.length} fields are invalid`);
  }
  static field(field: string, code: string, message: string) {
    return new ValidationError([{ field, code, message }]);
  }
}

/** Also thrown when the caller may not see the thing: existence never leaks across orgs. */
export class NotFoundError extends AppError {
  readonly code = "NOT_FOUND";
  constructor(readonly resource: string, readonly ref: string) {
    super(`${resource} ${ref} was not found`);
  }
}

export interface MissingPermission {
  resourceType: string;
  action: string;
  matchValue: string | null;
}

export class PermissionDeniedError extends AppError {
  readonly code = "PERMISSION_DENIED";
  constructor(readonly missing: MissingPermission | null, message?: string) {
    super(
      message ??
        (missing
          ? `Missing permission (${missing.resourceType}, ${missing.action}${missing.matchValue === null ? "" : `, ${missing.matchValue}`})`
          : "Permission denied"),
    );
  }
}

export class UnauthenticatedError extends AppError {
  readonly code = "UNAUTHENTICATED";
  constructor(message = "Send a valid token as `Authorization: Bearer <token>`") {
    super(message);
  }
}

/** A stale revision or a uniqueness clash: the seed's 409. */
export class ConflictError extends AppError {
  readonly code = "CONFLICT";
  constructor(message: string, readonly currentRevision: number | null = null) {
    super(message);
  }
}

export class InvalidStateError extends AppError {
  readonly code = "INVALID_STATE";
  constructor(readonly resource: string, readonly state: string, message: string) {
    super(message);
  }
}

/**
 * A per-person limit was reached: how many may exist at once (`limit`, retryAfterSeconds null:
 * free one first), or how fast they may be made (retryAfterSeconds: when the next is allowed).
 */
export class LimitExceededError extends AppError {
  readonly code = "LIMIT_EXCEEDED";
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number | null,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An upstream MCP server could not be read (no url, unreachable, too slow, or it answered an
 * error): what was asked of it is not known, never assumed.
 */
export class UpstreamUnavailableError extends AppError {
  readonly code = "UPSTREAM_UNAVAILABLE";
  constructor(
    /** upstream_not_configured | upstream_unavailable | upstream_timeout | upstream_error */
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The apply gate has not passed (seed 000, "The apply gate"). Carries the evaluation that said
 * so, with the version it was taken at, so a client can print exactly what is missing.
 */
export class GateNotPassedError extends AppError {
  readonly code = "GATE_NOT_PASSED";
  constructor(readonly gate: { planId: string; version: number; evaluation: GateEvaluation }) {
    super(
      gate.evaluation.reasons.length === 0
        ? "The apply gate has not passed."
        : `The apply gate has not passed: ${gate.evaluation.reasons.map((r) => r.message).join(" ")}`,
    );
  }
}
