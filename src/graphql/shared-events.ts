// One GraphQL execution per (operation, event) for the live gate subscriptions.
//
// planGate and workspaceGates deliver the same snapshot object to every subscriber of a plan on
// this process (src/services/gate-live.ts memoizes it per round). Executing the same selection
// set on that object once per subscriber made up most of the per-subscriber cost of a delivery
// (docs/benchmarks.md, "gate"). The fields these operations can select are pure functions of the
// snapshot (no context, no query), so the executed result is shared: cached by the event object's
// identity and the operation (document text, operation name, variables). Authorization is not
// affected: the hub authorizes every delivery before it pushes the snapshot to a subscriber.
//
// An operation is shared only if every field it selects is on the allowlist below; anything else
// (the `plan` field, which queries through Prisma, or a type whose fields may read the context)
// executes per subscriber exactly as before.
//
// Direct delivery: on graphql-ws, such a shared result is also serialized once per event and
// written straight to each subscriber's socket as the protocol's `next` message, instead of going
// through each subscription's own chain of async iterators (envelop's onNext hooks, graphql-ws's
// per-message send) — that chain cost more per subscriber than the socket write itself
// (docs/benchmarks.md, "gate"). Only a result with no errors goes direct: envelop's onNext hooks
// (error masking, the error handler) have nothing to do on one, and anything else takes the
// ordinary path. The hub writes direct only when the subscription's queue is empty and its
// consumer is waiting, so messages keep their order (LatestQueue.deliverDirect). A plugin that
// rewrites successful results in onNext would be skipped for these operations: add it here.

import {
  createSourceEventStream,
  execute,
  getNamedType,
  GraphQLError,
  isObjectType,
  Kind,
  print,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type GraphQLObjectType,
  type SelectionSetNode,
} from "graphql";
import { isPromise, type Plugin } from "graphql-yoga";
import type { Context, SubscriptionSink } from "./context.js";
import { Interned } from "../domain/interned.js";
import { forgetDecidedScopes } from "./helpers.js";

/** Per type, the fields whose value depends on the event only (null: every field of the type). */
const PURE: Record<string, ReadonlySet<string> | null> = {
  Subscription: new Set(["planGate", "workspaceGates"]),
  WorkspaceGates: null,
  GateStatus: new Set([
    "planId",
    "workspaceId",
    "workspaceName",
    "planStatus",
    "version",
    "source",
    "evaluatedAt",
    "evaluatedVersion",
    "passed",
    "evaluation",
  ]),
  GateEvaluation: null,
  GateBaseline: null,
  GateChange: null,
  GoverningPolicy: null,
  GateRequirement: null,
  GateMissingApprovers: null,
  GateReservation: null,
  GateReason: null,
  // Rows from the snapshot's own `people`. GatePerson.email depends on the caller's (member, read):
  // an operation selecting it executes per subscriber.
  GatePerson: new Set(["id", "name", "isServiceAccount"]),
  User: new Set(["id", "name", "email", "isServiceAccount"]),
  Role: new Set(["id", "key", "name", "description", "system", "deleted"]),
};

/**
 * A source stream that can take a direct writer (the hub's streams do, src/graphql/schema/gate.ts):
 * called with a function that writes an event to the transport and says whether it did.
 */
export const DIRECT_DELIVERY = Symbol("directDelivery");

/** Writes an event to the transport; false when it did not (the ordinary path takes it). */
export interface DirectWriter {
  write(event: unknown): boolean;
}

export interface DirectDeliverable {
  [DIRECT_DELIVERY]?: (writer: DirectWriter) => void;
  /**
   * next(), resolving with what `mapper` makes of the event, or null when the source cannot (then
   * SharedStream maps next()'s result itself): one promise per event, not two (the hub's
   * queues, through src/graphql/schema/gate.ts).
   */
  nextMapped?: <R>(mapper: { mapMessage(event: unknown): IteratorResult<R> | Promise<IteratorResult<R>> }) => Promise<IteratorResult<R>> | null;
}

/** Document → its text when every selected field is pure, else null. */
const sharedText = new WeakMap<DocumentNode, string | null>();
/** One operation's execution on one event: the result, and (once asked for) its JSON for direct delivery. */
interface Shared {
  result: ExecutionResult | Promise<ExecutionResult>;
  /** The result as a `next` message's payload; null when it must take the ordinary path (errors). */
  payload?: string | null;
}
/**
 * Operation keys in use, interned: the subscribers of one plan with one query hold one string,
 * not a copy each (they hold it as long as they subscribe).
 */
const keys = new Interned();

/** Event object → operation key → its execution. Dropped with the event. */
const results = new WeakMap<object, Map<string, Shared>>();

function isShareable(args: ExecutionArgs): boolean {
  const { schema, document } = args;
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations = [];
  for (const d of document.definitions) {
    if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    else if (d.kind === Kind.OPERATION_DEFINITION) operations.push(d);
  }
  if (operations.length !== 1 || operations[0]!.operation !== "subscription") return false;
  const root = schema.getSubscriptionType();
  if (!root) return false;
  const seen = new Set<string>();
  const walk = (type: GraphQLObjectType, set: SelectionSetNode): boolean => {
    const allowed = PURE[type.name];
    if (allowed === undefined) return false;
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        const name = sel.name.value;
        if (name === "__typename") continue;
        if (allowed !== null && !allowed.has(name)) return false;
        const field = type.getFields()[name];
        if (!field) return false;
        if (sel.selectionSet) {
          const next = getNamedType(field.type);
          if (!isObjectType(next) || !walk(next, sel.selectionSet)) return false;
        }
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const on = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : type;
        if (on !== type || !walk(type, sel.selectionSet)) return false;
      } else {
        const fragment = fragments.get(sel.name.value);
        if (!fragment || schema.getType(fragment.typeCondition.name.value) !== type) return false;
        if (seen.has(fragment.name.value)) continue;
        seen.add(fragment.name.value);
        if (!walk(type, fragment.selectionSet)) return false;
      }
    }
    return true;
  };
  return walk(root, operations[0]!.selectionSet);
}

function textOf(args: ExecutionArgs): string | null {
  let text = sharedText.get(args.document);
  if (text === undefined) {
    text = isShareable(args) ? print(args.document) : null;
    sharedText.set(args.document, text);
  }
  return text;
}

/** subscribe() for a shareable operation: one execution per event object and operation key. */
async function sharedSubscribe(args: ExecutionArgs, key: string) {
  const stream = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in stream)) return stream as ExecutionResult;
  return new SharedStream(args, key, stream[Symbol.asyncIterator]() as AsyncIterator<unknown> & DirectDeliverable);
}

/** One execution on one event for one operation key: the result, made once and shared. */
function sharedFor(args: ExecutionArgs, key: string, event: object): Shared {
  let byKey = results.get(event);
  if (!byKey) results.set(event, (byKey = new Map()));
  let shared = byKey.get(key);
  if (!shared) {
    const entry: Shared = { result: execute({ ...args, rootValue: event }) };
    // Once settled, later subscribers get the result itself rather than a promise of it. The
    // scopes decided while executing stay with no subscriber's context: whichever ran it, it
    // lives as long as its subscription (docs/benchmarks.md, "What a subscriber costs").
    const context = args.contextValue as Context;
    if (isPromise(entry.result)) {
      void entry.result.then(
        (value) => {
          entry.result = value;
          forgetDecidedScopes(context);
        },
        () => forgetDecidedScopes(context),
      );
    } else forgetDecidedScopes(context);
    byKey.set(key, (shared = entry));
  }
  return shared;
}

/**
 * A shareable subscription's result stream. A class, not a set of closures: one lives per
 * subscriber for as long as it subscribes, and its methods are shared by all of them
 * (docs/benchmarks.md, "What a subscriber costs").
 */
class SharedStream implements AsyncIterableIterator<ExecutionResult>, DirectWriter {
  /** The start of this subscription's `next` messages, for direct delivery (null without a sink). */
  private readonly prefix: string | null = null;
  private readonly sink: SubscriptionSink | undefined;

  constructor(
    private readonly args: ExecutionArgs,
    private readonly key: string,
    private readonly source: AsyncIterator<unknown> & DirectDeliverable,
  ) {
    const sink = (args.contextValue as Context | undefined)?.subscriptionSink;
    if (sink && source[DIRECT_DELIVERY]) {
      this.sink = sink;
      this.prefix = `{"id":${JSON.stringify(sink.id)},"type":"next","payload":`;
      source[DIRECT_DELIVERY](this);
    }
  }

  private resultFor(event: unknown): ExecutionResult | Promise<ExecutionResult> {
    return typeof event === "object" && event !== null ? sharedFor(this.args, this.key, event).result : execute({ ...this.args, rootValue: event });
  }

  /** Writes the event's result straight to the socket, as a `next` message serialized once per event; false when it must take the ordinary path. */
  write(event: unknown): boolean {
    if (typeof event !== "object" || event === null) return false;
    const shared = sharedFor(this.args, this.key, event);
    if (shared.payload === undefined) {
      const { result } = shared;
      if (isPromise(result)) return false; // not settled yet: this time, the ordinary path
      shared.payload = result.errors && result.errors.length > 0 ? null : JSON.stringify(result);
    }
    return shared.payload !== null && this.sink !== undefined && this.sink.send(`${this.prefix}${shared.payload}}`);
  }

  /** As graphql's own mapping does: an error from the stream is located at the operation. */
  private located(error: unknown): never {
    const operation = this.args.document.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION);
    const located = (e: unknown) =>
      new GraphQLError(e instanceof Error ? e.message : String(e), { originalError: e instanceof Error ? e : undefined, nodes: operation });
    if (error instanceof AggregateError) throw new AggregateError(error.errors.map(located), error.message);
    throw located(error);
  }

  /** An event's result, as next() resolves with it (the source's nextMapped calls this). */
  mapMessage(event: unknown): IteratorResult<ExecutionResult> | Promise<IteratorResult<ExecutionResult>> {
    const result = this.resultFor(event);
    return isPromise(result) ? result.then((value) => ({ value, done: false })) : { value: result, done: false };
  }

  // No async function in between: a result already executed for this event (every subscriber
  // after the first) is handed on in the same tick. A source that maps for us (the hub's queue,
  // once started) resolves its own promise with the result: nothing is chained per event.
  next(): Promise<IteratorResult<ExecutionResult>> {
    const mapped = this.source.nextMapped?.(this);
    if (mapped) return mapped;
    return this.source.next().then(
      (r): IteratorResult<ExecutionResult> | Promise<IteratorResult<ExecutionResult>> => {
        if (r.done) return r;
        const result = this.resultFor(r.value);
        return isPromise(result) ? result.then((value) => ({ value, done: false })) : { value: result, done: false };
      },
      (error) => this.located(error),
    );
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    await this.source.return?.();
    return { value: undefined, done: true };
  }

  async throw(error?: unknown): Promise<IteratorResult<ExecutionResult>> {
    if (!this.source.throw) throw error;
    await this.source.throw(error);
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

type SubscribeFn = Parameters<NonNullable<Plugin["onSubscribe"]>>[0]["subscribeFn"];

/**
 * The subscribe function the plugin sets, one per function it was handed (envelop's own, the same
 * for every operation without tracing): envelop keeps the one set for as long as the
 * subscription lives, so a closure made per operation was a closure and a context per subscriber.
 */
const subscribeFns = new WeakMap<SubscribeFn, SubscribeFn>();
function sharingSubscribeFn(subscribeFn: SubscribeFn): SubscribeFn {
  let sharing = subscribeFns.get(subscribeFn);
  if (!sharing) {
    sharing = ((a: ExecutionArgs) => {
      const text = textOf(a);
      if (text === null) return subscribeFn(a);
      return sharedSubscribe(a, keys.of(`${text}\u0000${a.operationName ?? ""}\u0000${JSON.stringify(a.variableValues ?? {})}`));
    }) as SubscribeFn;
    subscribeFns.set(subscribeFn, sharing);
  }
  return sharing;
}

/** The envelop plugin: shareable subscriptions run through sharedSubscribe, others unchanged. */
export function useSharedEventResults(): Plugin {
  return {
    onSubscribe({ args, subscribeFn, setSubscribeFn }) {
      if (textOf(args) === null) return;
      setSubscribeFn(sharingSubscribeFn(subscribeFn));
    },
  };
}
