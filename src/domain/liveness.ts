// A credential is only as alive as everything it stands for: its organization (not deleted), its
// workspace where it has one (not archived; workspaces are never deleted, only archived), and the
// person it acts for or was issued by (an active member of that organization). Every query that
// lets a credential act reads one of these predicates, so deleting an organization, archiving a
// workspace or deactivating a member stops every credential that depends on it at once.
//
// The credential kinds and what each depends on (test/credentials/liveness.test.ts iterates them):
// - API token: its organization; its user (the person it acts as) — src/auth/authenticate.ts,
//   src/authz/principal.ts, live WebSockets (SocketTokenReads in src/auth/authenticate.ts at
//   connection_init, liveTokenIds in src/auth/live-sockets.ts after).
// - Virtual key: its organization, its workspace, its creator (VirtualKey.createdById) —
//   the gateway's key reads (src/gateway/postgres-store.ts): tools/list, tools/call, the agent's
//   status read and resume; the delivery worker's preflight (src/workers/delivery/claim.ts) and the
//   authority check behind the status read (src/services/approvals/authority.ts).
// - Webhook: its organization; its creator when one is recorded (Webhook.createdById) —
//   src/workers/webhook-delivery.ts.
//
// Each helper takes the SQL expressions of the columns it reads (e.g. `k."orgId"`), so it can be
// spliced into any statement; none takes a value, so nothing user-controlled reaches the SQL.

/** The organization `orgId` exists and is not deleted. */
export const liveOrgSql = (orgId: string) =>
  `EXISTS (SELECT 1 FROM organizations live_o WHERE live_o.id = ${orgId} AND live_o."deletedAt" IS NULL)`;

/** `userId` is an active member of `orgId`. */
export const liveMemberSql = (orgId: string, userId: string) =>
  `EXISTS (SELECT 1 FROM memberships live_m WHERE live_m."orgId" = ${orgId} AND live_m."userId" = ${userId} AND live_m."deactivatedAt" IS NULL)`;

/** The workspace exists and is not archived. */
export const liveWorkspaceSql = (workspaceId: string) =>
  `EXISTS (SELECT 1 FROM workspaces live_w WHERE live_w.id = ${workspaceId} AND live_w."archivedAt" IS NULL)`;

/**
 * An API token (alias `t`) that still authenticates: not revoked, not expired, its organization
 * live and its user an active member there.
 */
export const liveApiTokenSql = (t: string) =>
  `(${t}."revokedAt" IS NULL AND (${t}."expiresAt" IS NULL OR ${t}."expiresAt" > now())
    AND ${liveOrgSql(`${t}."orgId"`)} AND ${liveMemberSql(`${t}."orgId"`, `${t}."userId"`)})`;

/**
 * A virtual key (alias `k`) whose own standing lets it act: not revoked, its organization live, its
 * creator still an active member. Its workspace is checked apart (liveWorkspaceSql), because the
 * gateway names that refusal on its own (`workspace_unavailable`).
 */
export const liveVirtualKeySql = (k: string) =>
  `(${k}."revokedAt" IS NULL AND ${liveOrgSql(`${k}."orgId"`)} AND ${liveMemberSql(`${k}."orgId"`, `${k}."createdById"`)})`;

/** Why a virtual key (alias `k`) may not act — `revoked`, `organization_deleted`, `issuer_removed` — or NULL when it may. */
export const virtualKeyDeadReasonSql = (k: string) =>
  `(CASE WHEN ${k}."revokedAt" IS NOT NULL THEN 'revoked'
         WHEN NOT ${liveOrgSql(`${k}."orgId"`)} THEN 'organization_deleted'
         WHEN NOT ${liveMemberSql(`${k}."orgId"`, `${k}."createdById"`)} THEN 'issuer_removed' END)`;

/**
 * A webhook (alias `w`) that may still deliver: its organization live, and its creator, when the
 * row records one, still an active member. (Rows from before the creator was recorded have none;
 * they follow their organization.)
 */
export const liveWebhookSql = (w: string) =>
  `(${liveOrgSql(`${w}."orgId"`)} AND (${w}."createdById" IS NULL OR ${liveMemberSql(`${w}."orgId"`, `${w}."createdById"`)}))`;

/** Why a webhook (alias `w`) may not deliver — `organization_deleted`, `issuer_removed` — or NULL when it may. */
export const webhookDeadReasonSql = (w: string) =>
  `(CASE WHEN NOT ${liveOrgSql(`${w}."orgId"`)} THEN 'organization_deleted'
         WHEN ${w}."createdById" IS NOT NULL AND NOT ${liveMemberSql(`${w}."orgId"`, `${w}."createdById"`)} THEN 'issuer_removed' END)`;
