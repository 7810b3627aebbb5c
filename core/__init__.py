"""The base every package builds on: config models and loading, Kafka clients and admin, the
topic and event contracts, card-number handling, errors and ports. It imports no other project
package."""
