import { builder } from "../builder.js";
import { PERMISSION_CATALOG, type CatalogEntry } from "../../domain/catalog/index.js";

export const CatalogFamily = builder.objectRef<CatalogEntry>("PermissionFamily").implement({
  description: "One resource family of the permission catalog, for a role editor to disable invalid cells.",
  fields: (t) => ({
    resourceType: t.exposeString("resourceType"),
    actions: t.exposeStringList("actions"),
    supportsPattern: t.exposeBoolean("supportsPattern"),
    supportsAuthzGroup: t.exposeBoolean("supportsAuthzGroup"),
    matchValue: t.exposeString("matchValue", { nullable: true, description: "What a name pattern is matched against (null: no per-resource identity)." }),
    groupsFrom: t.exposeString("groupsFrom", { nullable: true, description: "Whose authz groups a group-targeted grant matches." }),
    description: t.exposeString("description"),
  }),
});

builder.queryField("permissionCatalog", (t) =>
  t.field({
    type: [CatalogFamily],
    description: "The validity matrix: every family with its actions and the targeting modes Validate accepts.",
    resolve: () => [...PERMISSION_CATALOG],
  }),
);
