import { builder } from "../builder.js";
import {
  AppError,
  ConflictError,
  InvalidStateError,
  LimitExceededError,
  UpstreamUnavailableError,
  NotFoundError,
  PermissionDeniedError,
  UnauthenticatedError,
  ValidationError,
  type FieldIssue,
  type MissingPermission,
} from "../../errors.js";

/** Every expected failure implements Error with a stable code (plugin-errors unions). */
export const ErrorInterface = builder.interfaceRef<AppError>("Error").implement({
  description: "An expected failure of a mutation: match on __typename or code.",
  fields: (t) => ({
    code: t.exposeString("code", { description: "Stable machine-readable code." }),
    message: t.exposeString("message"),
  }),
});

const FieldIssueRef = builder.objectRef<FieldIssue>("FieldIssue").implement({
  fields: (t) => ({
    field: t.exposeString("field", { description: "Dotted path of the offending input field." }),
    code: t.exposeString("code"),
    message: t.exposeString("message"),
  }),
});

const MissingPermissionRef = builder.objectRef<MissingPermission>("MissingPermission").implement({
  description: "The permission tuple the caller lacks.",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    action: t.exposeString("action"),
    matchValue: t.exposeString("matchValue", { nullable: true }),
  }),
});

builder.objectType(ValidationError, {
  name: "ValidationError",
  description: "The input was rejected; `issues` names each offending field.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ValidationError,
  fields: (t) => ({ issues: t.field({ type: [FieldIssueRef], resolve: (e) => e.issues }) }),
});

builder.objectType(NotFoundError, {
  name: "NotFoundError",
  description: "The object does not exist or is not visible to the caller (existence never leaks across organizations).",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof NotFoundError,
  fields: (t) => ({ resource: t.exposeString("resource") }),
});

builder.objectType(PermissionDeniedError, {
  name: "PermissionDeniedError",
  description: "The caller lacks a permission; `missing` names the tuple.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof PermissionDeniedError,
  fields: (t) => ({ missing: t.field({ type: MissingPermissionRef, nullable: true, resolve: (e) => e.missing }) }),
});

builder.objectType(ConflictError, {
  name: "ConflictError",
  description: "A stale revision or a uniqueness clash (HTTP 409 semantics).",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ConflictError,
  fields: (t) => ({ currentRevision: t.int({ nullable: true, resolve: (e) => e.currentRevision }) }),
});

builder.objectType(LimitExceededError, {
  name: "LimitExceededError",
  description: "A per-person limit was reached: `limit` is the cap; `retryAfterSeconds`, when set, says when the next attempt may succeed.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof LimitExceededError,
  fields: (t) => ({
    limit: t.exposeInt("limit"),
    retryAfterSeconds: t.exposeInt("retryAfterSeconds", { nullable: true }),
  }),
});

builder.objectType(InvalidStateError, {
  name: "InvalidStateError",
  description: "The object is not in a state that allows the operation.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof InvalidStateError,
  fields: (t) => ({ resource: t.exposeString("resource"), state: t.exposeString("state") }),
});

builder.objectType(UpstreamUnavailableError, {
  name: "UpstreamUnavailableError",
  description: "An upstream MCP server could not be read: no url, unreachable, too slow, or it answered an error of its own.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof UpstreamUnavailableError,
  fields: (t) => ({
    reason: t.exposeString("reason", { description: "upstream_not_configured, upstream_unavailable, upstream_timeout or upstream_error." }),
  }),
});

builder.objectType(UnauthenticatedError, {
  name: "UnauthenticatedError",
  description: "No valid token was sent.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof UnauthenticatedError,
  fields: () => ({}),
});

/** The errors nearly every mutation can return. */
export const COMMON_ERRORS = [ValidationError, NotFoundError, PermissionDeniedError, ConflictError, UnauthenticatedError];
