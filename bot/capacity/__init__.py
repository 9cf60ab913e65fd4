"""Reserved capacity: SageMaker training plans and EC2 capacity reservations (Capacity Blocks for ML included),
per org, with the clusters that use them (`model`: the plain data; `aws`: reading it through the org's
accounts; `service`: the cached per-org reads; `notices`: which ending notices are due, pure; `monitor`: the
leader's check that posts them as "capacity" alerts)."""

from bot.capacity.model import Reservation, Source

__all__ = ["Reservation", "Source"]
