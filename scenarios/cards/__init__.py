"""Card velocity (`domain.type: card_velocity`): card holders shopping at home, online and on
trips, with injected fraud. The scenario is `scenario.CardVelocity`; its knobs are in `config`."""
