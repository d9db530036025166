// graphql-transport-ws on a `ws` server. The protocol's messages, codes and hooks are graphql-ws's
// own (its ServerOptions, parseMessage, stringifyMessage, CloseCode); this file runs them on the
// sockets in place of graphql-ws's makeServer + useServer (graphql-ws/use/ws), step for step as
// they do, with the differences that matter when one process holds 10,000 subscribers, each of
// which keeps what its socket and its operation hold for as long as it lives (docs/benchmarks.md,
// "What a subscriber costs"):
//
// - keep-alive is one timer for every socket, not one interval per socket: every KEEP_ALIVE_MS
//   each open socket is pinged, and one that has not answered the previous ping by then is
//   terminated (useServer's rule: no pong within KEEP_ALIVE_MS of a ping). A tick that comes
//   late (this process was busy: a long GC, a heap snapshot) terminates nobody: after such a
//   stall timers run before the sockets are read, so pongs that did arrive would look missing;
// - a streaming operation is pulled by an object of its own (StreamPull) once it has started,
//   not in the frame that handled its `subscribe` message: makeServer's message handler stays
//   suspended in a `for await` for the subscription's whole life, keeping the raw message (text
//   and parsed), its three `emit` closures and every local of that large function;
// - a socket is one object (SocketConnection: it is also the `ctx` the hooks get) and its `ws`
//   listeners are functions shared by every socket, not closures (and `once` wrappers) per socket;
// - the upgrade request is read once, when the socket opens (`extra` gets what it needs, such as
//   the client's address), and not kept; the connection_init wait is a timer cleared at init.

import type { IncomingMessage } from "node:http";
import {
  execute as graphqlExecute,
  getOperationAST,
  GraphQLError,
  parse as graphqlParse,
  subscribe as graphqlSubscribe,
  validate as graphqlValidate,
  type ExecutionArgs,
} from "graphql";
import {
  areGraphQLErrors,
  CloseCode,
  GRAPHQL_TRANSPORT_WS_PROTOCOL,
  handleProtocols,
  MessageType,
  parseMessage,
  stringifyMessage,
  type Context,
  type ExecutionResult,
  type OperationResult,
  type ServerOptions,
  type SubscribeMessage,
} from "graphql-ws";
import { isAsyncIterable } from "graphql-yoga";
import type { RawData, WebSocket, WebSocketServer } from "ws";
import { Interned } from "../domain/interned.js";
import type { Logger } from "../infra/logger.js";

/** useServer's default: a socket is pinged this often and must answer within the same time. */
export const KEEP_ALIVE_MS = 12_000;

/** What every `extra` carries: the socket (graphql-ws hooks read `ctx.extra.socket`). */
export interface SocketBound {
  readonly socket: WebSocket;
}

export interface GraphqlWsBinding<E extends SocketBound> {
  /** The `extra` of a socket that opened, from its upgrade request (which is not kept after this). */
  extra(socket: WebSocket, request: IncomingMessage): E;
  /** Closes a socket that has not sent connection_init within this time (graphql-ws: 4408). 0: never. */
  connectionInitWaitTimeout: number;
  keepAliveMs?: number;
  logger: Logger;
}

type Payload = Record<string, unknown> | undefined;
type Options<P extends Payload, E> = Omit<ServerOptions<P, E>, "connectionInitWaitTimeout">;

/** The text of the operations streaming on this process (many subscribers send the same). */
const streamedQueries = new Interned();

/** Close reasons are limited to 123 bytes by the WebSocket protocol. */
const closeReason = (error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  return message.length < 124 ? message : "Internal server error";
};

const isObject = (value: unknown): value is Record<PropertyKey, unknown> => typeof value === "object" && value !== null;
const isAsyncGenerator = (value: unknown): value is AsyncGenerator<ExecutionResult> =>
  isObject(value) && typeof value[Symbol.asyncIterator] === "function" && typeof value.return === "function";

/** An error out of a stream, as graphql-ws sends it (graphql 16: its message, the original kept). */
function streamError(error: unknown): GraphQLError {
  const original = error instanceof Error ? error : new Error(String(error));
  return new GraphQLError(original.message, { originalError: original });
}

/**
 * Serves graphql-ws on `wsServer`, as described above. Options are graphql-ws's own, except
 * connectionInitWaitTimeout, which the binding applies.
 */
export function serveGraphqlWs<P extends Payload, E extends SocketBound>(
  options: Options<P, E>,
  wsServer: WebSocketServer,
  binding: GraphqlWsBinding<E>,
): { dispose(): Promise<void> } {
  const { logger } = binding;
  wsServer.options.handleProtocols = handleProtocols;

  /** Every open socket's connection (looked up by the listeners every socket shares). */
  const connections = new Map<WebSocket, SocketConnection<P, E>>();

  /** Sockets waiting for connection_init, with the timer that closes them. */
  const initWaits = new Map<WebSocket, NodeJS.Timeout>();
  function clearInitWait(socket: WebSocket) {
    const timer = initWaits.get(socket);
    if (timer === undefined) return;
    clearTimeout(timer);
    initWaits.delete(socket);
  }

  /** Sockets pinged by the last keep-alive tick that have not answered yet. */
  const awaitingPong = new Set<WebSocket>();
  const keepAliveMs = binding.keepAliveMs ?? KEEP_ALIVE_MS;
  let lastTick = performance.now();
  const keepAlive =
    keepAliveMs > 0 && Number.isFinite(keepAliveMs)
      ? setInterval(() => {
          const now = performance.now();
          // Late by half an interval or more: the pongs may be unread yet, so nobody is judged.
          if (now - lastTick >= keepAliveMs * 1.5) awaitingPong.clear();
          lastTick = now;
          for (const socket of wsServer.clients) {
            if (socket.readyState !== socket.OPEN) continue;
            if (awaitingPong.has(socket)) {
              awaitingPong.delete(socket);
              socket.terminate();
              continue;
            }
            awaitingPong.add(socket);
            socket.ping();
          }
        }, keepAliveMs)
      : null;
  keepAlive?.unref();

  function internalError(socket: WebSocket, error: unknown, what: string) {
    logger.error({ err: error }, what);
    socket.close(CloseCode.InternalServerError, closeReason(error));
  }

  const server: ProtocolServer<P, E> = {
    options,
    initReceived: clearInitWait,
    failed: (socket, error) => internalError(socket, error, "graphql-ws message handling failed"),
  };

  // One listener function of each kind for every socket (ws calls them with the socket as `this`).
  function ponged(this: WebSocket) {
    awaitingPong.delete(this);
  }
  function received(this: WebSocket, data: RawData) {
    connections.get(this)?.received(String(data));
  }
  function errored(this: WebSocket, error: Error) {
    internalError(this, error, "websocket error");
  }
  function closed(this: WebSocket, code: number, reason: Buffer) {
    clearInitWait(this);
    awaitingPong.delete(this);
    const connection = connections.get(this);
    if (!connection) return;
    connections.delete(this);
    connection.closed(code, String(reason)).catch((error: unknown) => logger.error({ err: error }, "graphql-ws close handling failed"));
  }

  wsServer.once("error", (error) => {
    logger.error({ err: error }, "websocket server error");
    for (const socket of wsServer.clients) socket.close(CloseCode.InternalServerError, "Internal server error");
  });

  wsServer.on("connection", (socket, request) => {
    socket.on("error", errored);
    socket.on("pong", ponged);
    const timeout = binding.connectionInitWaitTimeout;
    if (timeout > 0 && Number.isFinite(timeout)) {
      initWaits.set(
        socket,
        setTimeout(() => {
          initWaits.delete(socket);
          socket.close(CloseCode.ConnectionInitialisationTimeout, "Connection initialisation timeout");
        }, timeout),
      );
    }
    connections.set(socket, new SocketConnection(server, socket, binding.extra(socket, request)));
    socket.on("message", received);
    socket.on("close", closed);
  });

  return {
    async dispose() {
      if (keepAlive) clearInterval(keepAlive);
      for (const timer of initWaits.values()) clearTimeout(timer);
      initWaits.clear();
      for (const socket of wsServer.clients) socket.close(1001, "Going away");
      wsServer.removeAllListeners();
      await new Promise<void>((resolve, reject) => wsServer.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

/** What every socket's connection shares. */
interface ProtocolServer<P extends Payload, E> {
  readonly options: Options<P, E>;
  /** connection_init arrived on this socket: its wait ends. */
  initReceived(socket: WebSocket): void;
  /** A message's handling (or a stream's) failed: the socket is closed with 4500. */
  failed(socket: WebSocket, error: unknown): void;
}

/**
 * One socket's side of the protocol, and the `ctx` its hooks get (graphql-ws's Context: the
 * same fields, kept the same way). A class: one lives per socket, its methods are shared.
 */
class SocketConnection<P extends Payload, E> implements Context<P, E> {
  connectionInitReceived = false;
  acknowledged = false;
  connectionParams?: Readonly<P>;
  subscriptions: Context<P, E>["subscriptions"] = Object.create(null);

  constructor(
    private readonly server: ProtocolServer<P, E>,
    private readonly socket: WebSocket,
    readonly extra: E,
  ) {
    if (this.refusedSubprotocol) socket.close(CloseCode.SubprotocolNotAcceptable, "Subprotocol not acceptable");
  }

  /** The client did not agree on graphql-transport-ws: the socket is closed at once and nothing of it is read. */
  private get refusedSubprotocol(): boolean {
    return this.socket.protocol !== GRAPHQL_TRANSPORT_WS_PROTOCOL;
  }

  /** Resolves once the socket has written `data` (at once if it is no longer open). */
  send(data: string): Promise<void> {
    const { socket } = this;
    return new Promise<void>((resolve, reject) => {
      if (socket.readyState !== socket.OPEN) return resolve();
      socket.send(data, (error) => (error ? reject(error) : resolve()));
    });
  }

  received(data: string): void {
    // A socket refused for its subprotocol has been closed already; its messages are not read.
    if (this.refusedSubprotocol) return;
    this.handle(data).catch((error: unknown) => this.server.failed(this.socket, error));
  }

  private async handle(data: string): Promise<void> {
    const { options } = this.server;
    let message;
    try {
      message = parseMessage(data, options.jsonMessageReviver);
    } catch {
      return this.socket.close(CloseCode.BadRequest, "Invalid message received");
    }
    switch (message.type) {
      case MessageType.ConnectionInit: {
        if (this.connectionInitReceived) return this.socket.close(CloseCode.TooManyInitialisationRequests, "Too many initialisation requests");
        this.connectionInitReceived = true;
        this.server.initReceived(this.socket);
        if (isObject(message.payload)) this.connectionParams = message.payload as Readonly<P>;
        const permittedOrPayload = await options.onConnect?.(this);
        if (permittedOrPayload === false) return this.socket.close(CloseCode.Forbidden, "Forbidden");
        this.acknowledged = true;
        await this.send(
          stringifyMessage(
            isObject(permittedOrPayload) ? { type: MessageType.ConnectionAck, payload: permittedOrPayload } : { type: MessageType.ConnectionAck },
            options.jsonMessageReplacer,
          ),
        );
        return;
      }
      case MessageType.Ping: {
        await options.onPing?.(this, message.payload);
        await this.send(stringifyMessage(message.payload ? { type: MessageType.Pong, payload: message.payload } : { type: MessageType.Pong }, options.jsonMessageReplacer));
        return;
      }
      case MessageType.Pong:
        await options.onPong?.(this, message.payload);
        return;
      case MessageType.Subscribe:
        return this.subscribe(message);
      case MessageType.Complete: {
        const subscription = this.subscriptions[message.id];
        delete this.subscriptions[message.id];
        if (isAsyncGenerator(subscription)) await subscription.return(undefined);
        return;
      }
      default:
        throw new Error(`Unexpected message of type ${message.type} received`);
    }
  }

  /**
   * Starts an operation. A stream is handed to pull() once it has started, and this returns: its
   * `subscribe` message's text and this frame are not kept while it runs.
   */
  private async subscribe(message: SubscribeMessage): Promise<void> {
    if (!this.acknowledged) return this.socket.close(CloseCode.Unauthorized, "Unauthorized");
    const { options } = this.server;
    const { id, payload } = message;
    if (id in this.subscriptions) return this.socket.close(CloseCode.SubscriberAlreadyExists, `Subscriber for ${id} already exists`);
    this.subscriptions[id] = null;
    let streaming = false;
    try {
      let execArgs: ExecutionArgs;
      const maybeExecArgsOrErrors = await options.onSubscribe?.(this, id, payload);
      if (maybeExecArgsOrErrors) {
        if (areGraphQLErrors(maybeExecArgsOrErrors)) return id in this.subscriptions ? await this.error(maybeExecArgsOrErrors, message) : undefined;
        else if (Array.isArray(maybeExecArgsOrErrors)) throw new Error("Invalid return value from onSubscribe hook, expected an array of GraphQLError objects");
        execArgs = maybeExecArgsOrErrors as ExecutionArgs;
      } else {
        const { schema } = options;
        if (!schema) throw new Error("The GraphQL schema is not provided");
        const args = { operationName: payload.operationName, document: (options.parse ?? graphqlParse)(payload.query), variableValues: payload.variables };
        execArgs = { ...args, schema: typeof schema === "function" ? await schema(this, id, payload, args) : schema };
        const validationErrors = (options.validate ?? graphqlValidate)(execArgs.schema, execArgs.document);
        if (validationErrors.length > 0) return id in this.subscriptions ? await this.error(validationErrors, message) : undefined;
      }
      const operationAST = getOperationAST(execArgs.document, execArgs.operationName);
      if (!operationAST) return id in this.subscriptions ? await this.error([new GraphQLError("Unable to identify operation")], message) : undefined;
      if (!("rootValue" in execArgs)) execArgs.rootValue = options.roots?.[operationAST.operation];
      if (!("contextValue" in execArgs)) {
        const { context } = options;
        execArgs.contextValue = typeof context === "function" ? await context(this, id, payload, execArgs) : context;
      }
      let operationResult: Awaited<OperationResult> =
        operationAST.operation === "subscription"
          ? await (options.subscribe ?? (graphqlSubscribe as (args: ExecutionArgs) => OperationResult))(execArgs)
          : await (options.execute ?? (graphqlExecute as (args: ExecutionArgs) => OperationResult))(execArgs);
      const maybeResult = await options.onOperation?.(this, id, payload, execArgs, operationResult);
      if (maybeResult) operationResult = maybeResult;
      if (isAsyncIterable(operationResult)) {
        if (!(id in this.subscriptions)) {
          if (isAsyncGenerator(operationResult)) void operationResult.return(undefined);
        } else {
          this.subscriptions[id] = operationResult as AsyncGenerator<ExecutionResult>;
          streaming = true;
          // Held as long as the stream runs (with the operation's context, as its params): one copy of each text.
          (payload as { query: string }).query = streamedQueries.of(payload.query);
          // Only what the hooks get is passed on: the id and payload (not the message's text), the arguments if onNext reads them.
          new StreamPull(this, { id, payload }, options.onNext ? execArgs : null).start(operationResult);
          return;
        }
      } else if (id in this.subscriptions) await this.next(operationResult, message, execArgs);
      await this.complete(id in this.subscriptions, message);
    } finally {
      if (!streaming) delete this.subscriptions[id];
    }
  }

  async next(result: ExecutionResult, { id, payload }: Pick<SubscribeMessage, "id" | "payload">, args: ExecutionArgs | null): Promise<void> {
    const { options } = this.server;
    const { errors, ...resultWithoutErrors } = result;
    const maybeResult = await options.onNext?.(this, id, payload, args!, result);
    await this.send(
      stringifyMessage(
        { id, type: MessageType.Next, payload: maybeResult || { ...resultWithoutErrors, ...(errors ? { errors: errors.map((e) => e.toJSON()) } : {}) } },
        options.jsonMessageReplacer,
      ),
    );
  }

  async error(errors: readonly GraphQLError[], { id, payload }: Pick<SubscribeMessage, "id" | "payload">): Promise<void> {
    const { options } = this.server;
    const maybeErrors = await options.onError?.(this, id, payload, errors);
    await this.send(stringifyMessage({ id, type: MessageType.Error, payload: maybeErrors || errors.map((e) => e.toJSON()) }, options.jsonMessageReplacer));
  }

  /** A stream's sending failed (as a message's handling that fails: the socket is closed with 4500). */
  failed(error: unknown): void {
    this.server.failed(this.socket, error);
  }

  async complete(notifyClient: boolean, { id, payload }: Pick<SubscribeMessage, "id" | "payload">): Promise<void> {
    const { options } = this.server;
    await options.onComplete?.(this, id, payload);
    if (notifyClient) await this.send(stringifyMessage({ id, type: MessageType.Complete }, options.jsonMessageReplacer));
  }

  /** The socket closed: its streams are ended, then the hooks told. */
  async closed(code: number, reason: string): Promise<void> {
    const { options } = this.server;
    // Refused for its subprotocol: nothing started, only onClose is told (as makeServer does).
    if (this.refusedSubprotocol) {
      await options.onClose?.(this, code, reason);
      return;
    }
    const subscriptions = { ...this.subscriptions };
    this.subscriptions = Object.create(null);
    await Promise.all(Object.values(subscriptions).filter(isAsyncGenerator).map((subscription) => subscription.return(undefined)));
    if (this.acknowledged) await options.onDisconnect?.(this, code, reason);
    await options.onClose?.(this, code, reason);
  }
}

/**
 * A started stream, sent result by result until it ends, fails or is completed: makeServer's
 * `for await` in its message handler, step for step (the result must be an object; a send that
 * fails closes the stream with return() first, whose own failure is ignored; a stream that fails
 * is answered with an error message), as an object of its own: while it waits for the next
 * result it holds this object and the two callbacks of that wait, not a suspended frame. What
 * fails here fails the socket, as makeServer's handler failing did (closed with 4500).
 */
class StreamPull<P extends Payload, E> {
  private iterator!: AsyncIterator<ExecutionResult>;

  constructor(
    private readonly connection: SocketConnection<P, E>,
    private readonly operation: Pick<SubscribeMessage, "id" | "payload">,
    private readonly args: ExecutionArgs | null,
  ) {}

  start(stream: AsyncIterable<ExecutionResult>): void {
    try {
      this.iterator = stream[Symbol.asyncIterator]();
    } catch (error) {
      return this.threw(error);
    }
    this.pull();
  }

  private pull(): void {
    let next;
    try {
      next = this.iterator.next();
    } catch (error) {
      return this.threw(error);
    }
    Promise.resolve(next).then(
      (result) => this.received(result),
      (error: unknown) => this.threw(error),
    );
  }

  private received(result: IteratorResult<ExecutionResult>): void {
    if (!isObject(result)) return this.threw(new TypeError(`Iterator result ${String(result)} is not an object`));
    if (result.done) return this.ended();
    this.connection.next(result.value, this.operation, this.args).then(
      () => this.pull(),
      (error: unknown) => this.sendFailed(error),
    );
  }

  /** The loop's body threw: the stream is closed (its return(), awaited, its failure ignored), then the error handled. */
  private sendFailed(error: unknown): void {
    let closing;
    try {
      const close = this.iterator.return;
      if (close === undefined || close === null) return this.threw(error);
      closing = close.call(this.iterator);
    } catch {
      return this.threw(error);
    }
    Promise.resolve(closing).then(
      () => this.threw(error),
      () => this.threw(error),
    );
  }

  /** The stream failed: an error message for the operation, then it completes (without a complete message). */
  private threw(error: unknown): void {
    const { connection, operation } = this;
    connection.error([streamError(error)], operation).then(
      () => {
        delete connection.subscriptions[operation.id];
        this.ended();
      },
      (failure: unknown) => this.failed(failure),
    );
  }

  private ended(): void {
    const { connection, operation } = this;
    connection.complete(operation.id in connection.subscriptions, operation).then(
      () => void delete connection.subscriptions[operation.id],
      (failure: unknown) => this.failed(failure),
    );
  }

  private failed(error: unknown): void {
    delete this.connection.subscriptions[this.operation.id];
    this.connection.failed(error);
  }
}
