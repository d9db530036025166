// workspacesChanged: the dashboard's workspace list, kept live. Pushed when a workspace the
// caller can read is created or changes (every gate:changed in the caller's organization,
// narrowed to the workspaces they may read at that moment), and with no ids when permissions
// change or the bus resynced (the caller re-reads the whole list). Nothing of another
// organization, and no workspace the caller cannot read, is ever named.

import { builder } from "../builder.js";
import { NotFoundError } from "../../errors.js";
import { findReadableWorkspace } from "../../services/workspaces.js";
import { mergeEvents } from "./approvals-events.js";
import { SIGNED_IN } from "../helpers.js";

interface WorkspacesChanged {
  workspaceIds: string[];
  reason: string;
}

const WorkspacesChangedRef = builder.objectRef<WorkspacesChanged>("WorkspacesChanged").implement({
  description: "Workspaces the caller can read that were created or changed; none when the whole list should be re-read.",
  fields: (t) => ({
    workspaceIds: t.exposeIDList("workspaceIds", { description: "Empty when the whole list should be re-read (permissions changed, or a resync)." }),
    reason: t.exposeString("reason", { description: "workspace_created, plan_submitted, approval, … or authz_changed / resync." }),
  }),
});

builder.subscriptionField("workspacesChanged", (t) =>
  t.withAuth(SIGNED_IN).field({
    type: WorkspacesChangedRef,
    description:
      "Pushed when a workspace you can read is created or changes (its plans, reservations, gate), and with no ids when " +
      "your permissions change: re-read the list then. Authorized on every event.",
    subscribe: async function* (_root, _args, ctx) {
      await ctx.authz.requireMember();
      for await (const event of mergeEvents(ctx, ["gate:changed", "authz:changed"])) {
        if (event.payload.orgId !== ctx.viewer.orgId) continue;
        // Authorize on every event: a grant removed since subscribing narrows what is named.
        ctx.authz.refresh();
        const principal = await ctx.authz.principal();
        if (!principal.orgExists || principal.orgDeleted || !principal.membershipActive) return;
        if (event.topic === "authz:changed") {
          yield { workspaceIds: [], reason: event.payload.reason === "resync" ? "resync" : "authz_changed" };
          continue;
        }
        const readable: string[] = [];
        for (const id of event.payload.workspaceIds) {
          try {
            readable.push((await findReadableWorkspace(ctx.db, ctx.authz, id)).id);
          } catch (error) {
            if (!(error instanceof NotFoundError)) throw error;
          }
        }
        if (readable.length) yield { workspaceIds: readable, reason: event.payload.reason };
      }
    },
    resolve: (event) => event,
  }),
);
