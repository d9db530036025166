// A gate's explanation as plain text: what is missing, and from whom. Pure (no Node, no DOM):
// the CLI prints these lines and the dashboard renders the same ones, so both say the same thing.
import type { GateStatusFieldsFragment } from "../generated/graphql/graphql.js";

export type GateStatusView = GateStatusFieldsFragment;

export interface GateLine {
  /** "missing" lines say what still holds the plan; "ok" lines what is already satisfied. */
  kind: "missing" | "ok" | "info";
  text: string;
  /** Who could supply what is missing (names), when the gate says. */
  from?: string[];
}

const names = (users: ReadonlyArray<{ name: string }> | null | undefined) => (users ?? []).map((u) => u.name);
const list = (items: string[]) => (items.length ? items.join(", ") : "nobody");

export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

export function gateHeadline(gate: GateStatusView): string {
  const verdict = gate.passed ? "PASSED" : "NOT PASSED";
  return `${gate.workspaceName} · plan ${gate.planId} · ${gate.planStatus.toLowerCase()} · gate ${verdict}`;
}

export function explainGate(gate: GateStatusView): GateLine[] {
  const e = gate.evaluation;
  // The summary restates the reasons in one line (for a chat message); list the reasons instead.
  const lines: GateLine[] = e.reasons.length ? [] : [{ kind: "ok", text: e.summary }];
  const approvers = names(e.countedApprovers);
  lines.push({ kind: approvers.length ? "ok" : "info", text: `${e.approvalsCounted} approval${e.approvalsCounted === 1 ? "" : "s"} counted${approvers.length ? `: ${approvers.join(", ")}` : ""}` });
  if (e.ignoredApprovers.length) {
    lines.push({ kind: "info", text: `approved without standing (counts for nothing): ${names(e.ignoredApprovers).join(", ")}` });
  }
  for (const reason of e.reasons) {
    const line: GateLine = { kind: "missing", text: reason.message };
    if (reason.code === "BASELINE_NOT_MET") {
      line.from = [`anyone holding approve on ${gate.workspaceName}`];
    } else if (reason.code === "POLICY_COUNT_NOT_MET" || reason.code === "APPROVER_LIST_MISSING") {
      const requirement = e.requirements.find((r) => r.policyId === reason.policyId && r.action === reason.action);
      const missing = requirement?.missingApprovers;
      if (reason.code === "APPROVER_LIST_MISSING" && missing) line.from = names(missing.eligibleUsers);
      else if (requirement) line.from = [`holders of approve on ${gate.workspaceName}`, ...names(requirement.missingApprovers?.eligibleUsers)];
    } else if (reason.code === "RESERVATION_UNANSWERED") {
      const reservation = e.reservations.find((r) => r.reservationId === reason.reservationId);
      if (reservation?.holderUser) line.from = [reservation.holderUser.name];
      else if (reservation?.holderRole) line.from = names(reservation.currentMembers);
    }
    lines.push(line);
  }
  for (const r of e.reservations.filter((x) => x.answered)) {
    const holder = r.holderUser?.name ?? (r.holderRole ? `role ${r.holderRole.name}` : "?");
    lines.push({ kind: "ok", text: `reservation for ${holder} answered by ${r.answeredBy?.name ?? "?"}` });
  }
  return lines;
}

/** The explanation as terminal lines (✓ / ✗ / ·), indented under the headline. */
export function gateText(gate: GateStatusView): string {
  const out = [gateHeadline(gate)];
  for (const line of explainGate(gate)) {
    const mark = line.kind === "missing" ? "✗" : line.kind === "ok" ? "✓" : "·";
    out.push(`  ${mark} ${line.text}`);
    if (line.from) out.push(`      from: ${list(line.from)}`);
  }
  return out.join("\n");
}
