"""Distributed Connect's group membership: the wire formats of Connect's group sub-protocol
(protocol), the incremental cooperative assignor that the leader runs (assignor) and the
member that takes a worker through FindCoordinator/JoinGroup/SyncGroup/Heartbeat (member)."""
