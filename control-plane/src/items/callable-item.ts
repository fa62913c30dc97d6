// What the call path needs of a stored credential: sealed, never opened in the control plane.

/** A stored credential as the call path needs it: sealed, never opened here. */
export interface CallableItem {
  id: string;
  name: string;
  folderId?: string | null;
  allowedHosts: readonly string[];
  inject: string;
  username: string | null;
  sealingKeyId: string;
  sealedValue: Uint8Array;
  /** When a call last went out with it (written at most once a minute); null: never. */
  lastUsedAt?: Date | null;
}
