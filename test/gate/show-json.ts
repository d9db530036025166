// A `terraform show -json` document as Terraform writes it (format 1.2): an update with a
// sensitive attribute, a create with values known only after apply, a replace, a delete and a
// no-op. The secret must never be stored or shown.

export const SECRET = "hunter2-do-not-store";

/** A `terraform show -json` document, as Terraform writes it (format 1.2). */
export const SHOW_JSON = {
  format_version: "1.2",
  terraform_version: "1.9.5",
  resource_changes: [
    {
      address: "aws_db_instance.main",
      type: "aws_db_instance",
      name: "main",
      change: {
        actions: ["update"],
        before: { instance_class: "db.t3.micro", password: SECRET, tags: { team: "data", env: "prod" }, port: 5432 },
        after: { instance_class: "db.t3.large", password: `${SECRET}-rotated`, tags: { team: "data", env: "prod", "kubernetes.io/role": "db" }, port: 5432 },
        before_sensitive: { password: true },
        after_sensitive: { password: true },
        after_unknown: {},
      },
    },
    {
      address: "aws_s3_bucket.logs",
      change: {
        actions: ["create"],
        before: null,
        after: { bucket: "acme-logs", force_destroy: false, grants: [{ type: "CanonicalUser" }] },
        before_sensitive: false,
        after_sensitive: {},
        after_unknown: { arn: true, id: true, grants: [{ id: true }] },
      },
    },
    {
      address: "aws_instance.old",
      change: {
        actions: ["delete", "create"],
        before: { ami: "ami-1", user_data: SECRET },
        after: { ami: "ami-2", user_data: SECRET },
        before_sensitive: { user_data: true },
        after_sensitive: { user_data: true },
        after_unknown: { id: true },
      },
    },
    { address: "aws_iam_role.gone", change: { actions: ["delete"], before: { name: "gone" }, after: null, before_sensitive: {}, after_sensitive: false } },
    { address: "aws_vpc.same", change: { actions: ["no-op"], before: { cidr: "10.0.0.0/16" }, after: { cidr: "10.0.0.0/16" } } },
  ],
};

