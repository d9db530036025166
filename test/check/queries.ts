// The check API's operation, as a runner or a dashboard sends it (shared by the tests of test/check).
export const CHECK = `query($checks: [PermissionCheckInput!]!) {
  checkPermissions(checks: $checks) {
    __typename
    ... on QueryCheckPermissionsSuccess { data {
      principalId resourceType action resourceId allowed decision
      grant { resourceType action resourcePattern likePattern authzGroup }
      via { kind roleId roleKey roleName bindingId identitySourceId identitySourceName groupKey }
      missing { resourceType action matchValue groups }
    } }
    ... on Error { code message }
    ... on ValidationError { issues { field code } }
    ... on PermissionDeniedError { missing { resourceType action matchValue } }
  }
}`;
