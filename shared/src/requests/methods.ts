// The HTTP methods a call may use (spec 4.2 http_request `method`), for every place that checks one.

export const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

export type HttpMethod = (typeof HTTP_METHODS)[number];
