// The http bench's baseline server (bench/http.ts starts it as its own process): a minimal
// graphql-yoga answering `viewer { name }` from memory, on node:http, nothing else mounted.
// What any GraphQL server on this stack costs per request before it does any work of its own.

import { createServer } from "node:http";
import { createSchema, createYoga } from "graphql-yoga";

const name = process.env.BENCH_VIEWER_NAME ?? "Bench Viewer";
const yoga = createYoga({
  schema: createSchema({
    typeDefs: /* GraphQL */ `
      type Viewer {
        name: String!
      }
      type Query {
        viewer: Viewer!
      }
    `,
    resolvers: { Query: { viewer: () => ({ name }) } },
  }),
  logging: false,
});

const server = createServer(yoga);
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === "object" && address ? address.port : ""}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
