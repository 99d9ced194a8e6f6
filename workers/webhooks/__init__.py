"""Webhooks: subscriptions, the announcement of a finished job, signed deliveries.

A subscription belongs to a tenant (None: the local default tenant) and names the finished
statuses it wants; `cognify --webhook URL` makes one for a single job (all its finished
statuses) with a secret shown once. When a job is stored finished (`JobTracker.save`) each
matching subscription gets one delivery, announced once per status (a marker key, so a
finalise repeated by a redelivered task announces nothing twice). A delivery is the Celery
task `cogmill.deliver_webhook` on the default queue; in embedded mode its first attempt runs
inline in the thread that finished the job (the one-shot CLI process would otherwise stop its
worker threads before the message is taken). A failed attempt is retried with exponential
backoff for `webhook_retry_seconds`; each attempt is appended to the job's delivery log.
Embedded mode's retries live in its in-process broker, so each is also kept in the state store
until it runs, and the next process starting worker threads schedules those left over.
"""
