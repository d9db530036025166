// Where the dashboard and the explorer keep the signed-in token: this tab's sessionStorage, under
// one key, so the dashboard's Explorer link opens the explorer signed in.
export const TOKEN_STORAGE_KEY = "countersign.token";
