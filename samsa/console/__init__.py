"""The web console of issue 18: a server-rendered Starlette app (`app.build_console`) that works
with the cluster only through Kafka clients, the schema registry's and Connect's REST APIs, so it
can run in the broker's admin HTTP thread or in a process of its own (`python -m samsa.console`)."""
